"""OutlookProvider against the sandbox's Graph over TLS: deltas, batched fetches and the typed errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings

from integrations.providers.base import (
    CursorExpired,
    ProviderAuthError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from integrations.providers.outlook import OutlookProvider, graph_session
from sandbox.client import SandboxClient

ADDRESS = "linus@example.com"
LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)


def deliver(sandbox: SandboxClient, number: int, *, received_at: datetime | None = None, html: bool = False) -> str:
    answer = sandbox.deliver_outlook(
        ADDRESS,
        subject=f"Task {number}",
        sender=f"Sender {number} <sender{number}@example.org>",
        html=f"<p>Please do <b>task {number}</b>.</p>" if html else None,
        body=None if html else f"Please do task {number}.",
        received_at=received_at or datetime(2026, 11, 2, 10, number % 60, tzinfo=UTC),
    )
    return str(answer["id"])


def connect(sandbox: SandboxClient) -> OutlookProvider:
    sandbox.create_outlook_mailbox(ADDRESS)
    token = sandbox.issue_microsoft_token(ADDRESS)["access_token"]
    return OutlookProvider(lambda force_refresh=False: token, address=ADDRESS)


def graph_calls(sandbox: SandboxClient, *, batch_parts: bool = False) -> list[dict[str, Any]]:
    return [r for r in sandbox.requests("graph") if r["batch_part"] == batch_parts]


@pytest.fixture
def provider(sandbox: SandboxClient) -> OutlookProvider:
    return connect(sandbox)


@pytest.fixture
def small_pages(settings: Any) -> None:
    settings.GRAPH_PAGE_SIZE = 3


@pytest.fixture
def no_retries(settings: Any) -> None:
    settings.GRAPH_MAX_RETRIES = 0


def test_fetch_delta_follows_every_page_to_the_delta_link_and_saves_nothing(
    sandbox: SandboxClient, provider: OutlookProvider, small_pages: None
) -> None:
    ids = [deliver(sandbox, n, html=n % 2 == 0) for n in range(8)]
    cursor = provider.initial_cursor()
    sandbox.clear_requests()

    delta = provider.fetch_delta(cursor)
    again = provider.fetch_delta(cursor)

    assert delta.message_ids == ids
    assert again.message_ids == ids  # nothing was consumed or stored
    assert delta.new_cursor.startswith(f"{settings.SANDBOX_TLS_URL}/v1.0/") and "$deltatoken=" in delta.new_cursor
    assert len(graph_calls(sandbox)) == 2 * 3  # 8 messages in pages of 3, twice
    assert delta.received[ids[0]] == datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    assert delta.backfill  # the first read of the inbox: the caller bounds it
    [email] = provider.fetch_emails([ids[0]]).emails  # bodies come in $batch, for the mail that is read
    assert email.provider == "outlook"
    assert email.sender == "Sender 0 <sender0@example.org>"
    assert email.subject == "Task 0"
    assert email.body_text == "Please do task 0."  # HTML bodies come as text
    assert email.received_at == datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    assert email.web_link.startswith("https://outlook.office365.com/owa/?ItemID=")
    assert email.thread_id


def test_every_graph_request_asks_for_immutable_ids_and_text_bodies(
    sandbox: SandboxClient, provider: OutlookProvider
) -> None:
    ids = [deliver(sandbox, n) for n in range(3)]
    sandbox.clear_requests()

    delta = provider.fetch_delta(provider.initial_cursor())
    provider.fetch_emails(ids)
    provider.account_address()

    requests = sandbox.requests("graph")
    assert len(requests) == 1 + 1 + 3 + 1  # delta, $batch with its 3 parts, /me
    for logged in requests:
        prefer = logged["headers"].get("Prefer", "")
        assert 'IdType="ImmutableId"' in prefer, logged
        assert "Authorization" not in logged["headers"]  # the log never holds a token
    assert f"odata.maxpagesize={settings.GRAPH_PAGE_SIZE}" in requests[0]["headers"]["Prefer"]
    assert delta.message_ids == ids  # immutable ids, the ones the control API answered


def test_a_message_read_since_comes_back_in_the_next_delta(sandbox: SandboxClient, provider: OutlookProvider) -> None:
    first, second = deliver(sandbox, 1), deliver(sandbox, 2)
    delta = provider.fetch_delta(provider.initial_cursor())
    third = deliver(sandbox, 3)
    sandbox.mark_outlook_read(ADDRESS, [first])
    sandbox.delete_outlook(ADDRESS, [second])

    after = provider.fetch_delta(delta.new_cursor)

    assert after.message_ids == [first, third]  # oldest first; the deleted one is not listed
    assert not after.backfill
    assert provider.fetch_delta(after.new_cursor).message_ids == []


def test_the_delta_is_unfiltered_so_an_old_message_moved_into_the_inbox_is_listed(
    sandbox: SandboxClient, provider: OutlookProvider
) -> None:
    now = datetime.now(UTC)
    archived = sandbox.deliver_outlook(
        ADDRESS, subject="Old", body="Please file the claim.", received_at=now - timedelta(days=40), folder="archive"
    )["id"]
    delta = provider.fetch_delta(provider.initial_cursor())
    assert delta.message_ids == []

    sandbox.move_outlook(ADDRESS, [archived], "inbox")
    after = provider.fetch_delta(delta.new_cursor)

    assert after.message_ids == [archived]
    assert after.received[archived] == (now - timedelta(days=40)).replace(microsecond=0)
    assert "$filter" not in sandbox.requests("graph")[0]["query"]


def test_a_resync_lists_the_mail_since_a_time_and_counts_what_is_over_the_bound(
    sandbox: SandboxClient, provider: OutlookProvider
) -> None:
    now = datetime.now(UTC)
    deliver(sandbox, 1, received_at=now - timedelta(days=9))
    recent = [deliver(sandbox, n, received_at=now - timedelta(hours=10 - n)) for n in range(2, 7)]

    delta = provider.resync(now - timedelta(days=1), 3, cursor="", handled=lambda ids: set())

    assert delta.message_ids == recent[-3:]
    assert delta.not_read == 2
    assert "$deltatoken=" in delta.new_cursor
    assert provider.fetch_delta(delta.new_cursor).message_ids == []


def test_an_expired_delta_link_raises_cursor_expired(sandbox: SandboxClient, provider: OutlookProvider) -> None:
    deliver(sandbox, 1)
    delta = provider.fetch_delta(provider.initial_cursor())
    sandbox.expire_outlook_delta(ADDRESS)

    with pytest.raises(CursorExpired):
        provider.fetch_delta(delta.new_cursor)


def test_a_cursor_that_is_not_a_graph_link_raises_cursor_expired(provider: OutlookProvider) -> None:
    with pytest.raises(CursorExpired):
        provider.fetch_delta("https://attacker.example/v1.0/me/mailFolders/inbox/messages/delta")


def test_a_throttled_request_is_retried_after_retry_after(sandbox: SandboxClient, provider: OutlookProvider) -> None:
    message = deliver(sandbox, 1)
    sandbox.fault("graph", 429, route="/messages/delta", headers={"Retry-After": "0.2"}, times=1)
    sandbox.clear_requests()

    delta = provider.fetch_delta(provider.initial_cursor())

    assert delta.message_ids == [message]
    calls = graph_calls(sandbox)
    assert [c["status"] for c in calls] == [429, 200]
    assert calls[1]["at"] - calls[0]["at"] >= 0.2


def test_throttled_for_good_raises_rate_limited_with_retry_after(
    sandbox: SandboxClient, provider: OutlookProvider
) -> None:
    sandbox.fault("graph", 429, route="/messages/delta", headers={"Retry-After": "0.05"}, times=None)
    sandbox.clear_requests()

    with pytest.raises(ProviderRateLimited) as error:
        provider.fetch_delta(provider.initial_cursor())

    assert error.value.retry_after == pytest.approx(0.05)
    assert len(graph_calls(sandbox)) == settings.GRAPH_MAX_RETRIES + 1


def test_a_long_retry_after_goes_back_to_the_caller_at_once(sandbox: SandboxClient, provider: OutlookProvider) -> None:
    sandbox.fault("graph", 429, route="/messages/delta", headers={"Retry-After": "120"}, times=None)
    sandbox.clear_requests()

    with pytest.raises(ProviderRateLimited) as error:
        provider.fetch_delta(provider.initial_cursor())

    assert error.value.retry_after == 120
    assert len(graph_calls(sandbox)) == 1


def test_service_unavailable_raises_provider_unavailable(
    sandbox: SandboxClient, provider: OutlookProvider, no_retries: None
) -> None:
    sandbox.fault("graph", 503, route="/messages/delta", times=None)
    with pytest.raises(ProviderUnavailable):
        provider.fetch_delta(provider.initial_cursor())


def test_a_bad_token_raises_provider_auth_error(sandbox: SandboxClient) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)
    provider = OutlookProvider(lambda force_refresh=False: "not-a-token")

    with pytest.raises(ProviderAuthError):
        provider.fetch_delta(provider.initial_cursor())


def test_a_refused_refresh_goes_through_as_auth_error(sandbox: SandboxClient) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)

    def refused(force_refresh: bool = False) -> str:
        raise ProviderAuthError("Microsoft refused the refresh.")

    with pytest.raises(ProviderAuthError, match="refused the refresh"):
        OutlookProvider(refused).account_address()


def test_a_graph_that_cannot_be_reached_raises_provider_unavailable(settings: Any) -> None:
    settings.GRAPH_API_ENDPOINT = "https://127.0.0.1:1/v1.0"  # nothing listens on port 1
    provider = OutlookProvider(lambda force_refresh=False: "token")

    with pytest.raises(ProviderUnavailable):
        provider.account_address()


def test_a_next_link_loop_is_cut_short(sandbox: SandboxClient, provider: OutlookProvider, settings: Any) -> None:
    """A Graph that only ever answers the same nextLink must not hold a worker forever."""
    settings.GRAPH_PAGE_SIZE = 1
    deliver(sandbox, 1)
    deliver(sandbox, 2)
    cursor = provider.initial_cursor()
    # Every page after the first answers an empty page that links to itself.
    loop = {"@odata.nextLink": f"{settings.GRAPH_API_ENDPOINT}/me/mailFolders/inbox/messages/delta?$skiptoken=x"}
    sandbox.fault("graph", 200, route="skiptoken", body={**loop, "value": []}, times=None)
    sandbox.clear_requests()

    with pytest.raises(ProviderUnavailable, match="same sync page twice"):
        provider.fetch_delta(cursor)

    assert len(graph_calls(sandbox)) == 3  # the first page, the looping one, and the same again


def test_fetch_emails_batches_twenty_at_a_time_and_reads_a_missing_message_again(
    sandbox: SandboxClient, provider: OutlookProvider
) -> None:
    ids = [deliver(sandbox, n, html=True) for n in range(45)]
    sandbox.delete_outlook(ADDRESS, [ids[10]])
    sandbox.clear_requests()

    fetched = provider.fetch_emails(list(reversed(ids)))
    emails = fetched.emails

    assert [e.message_id for e in emails] == [m for m in reversed(ids) if m != ids[10]]
    assert list(fetched.failed) == [ids[10]]  # read twice, 404 both times: the pipeline decides, later
    assert emails[-1].body_text == "Please do task 0."
    posts = [c for c in graph_calls(sandbox) if c["method"] == "POST"]
    assert [c["path"] for c in posts] == ["/v1.0/$batch"] * 4  # three, then the deleted one read again
    assert len(graph_calls(sandbox, batch_parts=True)) == 46


def test_a_throttled_batch_part_is_fetched_again(sandbox: SandboxClient, provider: OutlookProvider) -> None:
    ids = [deliver(sandbox, n) for n in range(3)]
    sandbox.fault("graph", 429, route=f"messages/{ids[1]}", headers={"Retry-After": "0.1"}, times=1)
    sandbox.clear_requests()

    emails = provider.fetch_emails(ids).emails

    assert [e.message_id for e in emails] == ids
    posts = [c for c in graph_calls(sandbox) if c["method"] == "POST"]
    assert len(posts) == 2  # the whole batch, then only the throttled part


def test_a_passing_404_of_a_batch_part_is_not_a_deletion(sandbox: SandboxClient, provider: OutlookProvider) -> None:
    ids = [deliver(sandbox, n) for n in range(3)]
    sandbox.fault("graph", 404, route=f"messages/{ids[1]}", times=1)

    fetched = provider.fetch_emails(ids)

    assert [e.message_id for e in fetched.emails] == ids
    assert fetched.failed == {}


def test_a_message_that_keeps_failing_is_its_own_failure_not_the_mailboxs(
    sandbox: SandboxClient, provider: OutlookProvider
) -> None:
    ids = [deliver(sandbox, n) for n in range(3)]
    sandbox.fault("graph", 500, route=f"messages/{ids[1]}", times=None)

    fetched = provider.fetch_emails(ids)

    assert [e.message_id for e in fetched.emails] == [ids[0], ids[2]]
    assert list(fetched.failed) == [ids[1]]


def test_account_address_reads_me(provider: OutlookProvider) -> None:
    assert provider.account_address() == ADDRESS


def test_the_session_trusts_only_the_configured_certificate(monkeypatch: Any) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")

    session = graph_session()

    assert session.verify == settings.MICROSOFT_CA_BUNDLE
    assert session.trust_env is False


def test_a_batch_part_answering_503_with_retry_after_is_throttling_not_the_messages_fault(
    sandbox: SandboxClient, provider: OutlookProvider, no_retries: None
) -> None:
    ids = [deliver(sandbox, n) for n in range(3)]
    sandbox.fault("graph", 503, route=f"messages/{ids[1]}", headers={"Retry-After": "120"}, times=None)

    with pytest.raises(ProviderRateLimited) as caught:
        provider.fetch_emails(ids)

    assert caught.value.retry_after == 120
