"""The sandbox's Microsoft Graph answers the way Graph does (reference §B): delta paging and rounds, both
folder URL forms, immutable ids, $batch, the 410 resync, throttling, the 401 body, and its control API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
import urllib3
from django.conf import settings

from sandbox.client import SandboxClient, SandboxControlError
from sandbox.demo import load_demo_outlook
from sandbox.demo.messages import demo_messages
from sandbox.server import SandboxServer

ADDRESS = "grace@example.com"
GRAPH = settings.GRAPH_API_ENDPOINT
IMMUTABLE = 'IdType="ImmutableId"'


def session() -> requests.Session:
    http = requests.Session()
    http.trust_env = False
    http.verify = settings.MICROSOFT_CA_BUNDLE
    return http


class Graph:
    """A bare Graph client: the test sees every status, header and body."""

    def __init__(self, token: str) -> None:
        self.http = session()
        self.token = token

    def get(self, url: str, *, prefer: list[str] | None = None, params: Any = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        if prefer:
            headers["Prefer"] = ", ".join(prefer)
        target = url if url.startswith("https://") else GRAPH + url
        return self.http.get(target, headers=headers, params=params, timeout=10)

    def delta_round(self, url: str, *, page_size: int, prefer: str = IMMUTABLE) -> tuple[list[dict], str, int]:
        """All items of one round, the deltaLink and the number of pages."""
        items: list[dict] = []
        pages = 0
        while True:
            response = self.get(url, prefer=[f"odata.maxpagesize={page_size}, {prefer}"])
            assert response.status_code == 200, response.text
            page = response.json()
            pages += 1
            items += page["value"]
            if "@odata.deltaLink" in page:
                return items, page["@odata.deltaLink"], pages
            url = page["@odata.nextLink"]


@pytest.fixture
def graph(sandbox: SandboxClient) -> Graph:
    sandbox.create_outlook_mailbox(ADDRESS)
    return Graph(sandbox.issue_microsoft_token(ADDRESS)["access_token"])


def deliver(sandbox: SandboxClient, number: int, **options: Any) -> str:
    answer = sandbox.deliver_outlook(
        ADDRESS,
        subject=f"Message {number}",
        sender=f"Sender {number} <sender{number}@example.org>",
        html=f"<p>Body of <b>message {number}</b>.</p>",
        received_at=options.pop("received_at", datetime(2026, 11, 2, 10, number % 60, tzinfo=UTC)),
        **options,
    )
    return str(answer["id"])


def test_delta_pages_through_the_inbox_to_an_absolute_https_delta_link(sandbox: SandboxClient, graph: Graph) -> None:
    ids = [deliver(sandbox, n) for n in range(7)]

    items, delta_link, pages = graph.delta_round("/me/mailFolders/inbox/messages/delta", page_size=3)

    assert pages == 3
    assert [i["id"] for i in items] == ids
    assert delta_link.startswith(f"{settings.SANDBOX_TLS_URL}/v1.0/") and "$deltatoken=" in delta_link
    first = items[0]
    assert first["subject"] == "Message 0"
    assert first["from"] == {"emailAddress": {"name": "Sender 0", "address": "sender0@example.org"}}
    assert first["receivedDateTime"] == "2026-11-02T10:00:00Z"
    assert first["body"] == {"contentType": "html", "content": "<p>Body of <b>message 0</b>.</p>"}
    assert first["webLink"].startswith("https://outlook.office365.com/owa/?ItemID=")
    assert first["webLink"].endswith("&exvsurl=1&viewmodel=ReadMessageItem")
    assert first["isRead"] is False and first["@odata.etag"].startswith('W/"')


def test_next_delta_has_new_mail_read_mail_again_and_removed_mail(sandbox: SandboxClient, graph: Graph) -> None:
    kept, read, deleted = (deliver(sandbox, n) for n in range(3))
    _, delta_link, _ = graph.delta_round("/me/mailFolders/inbox/messages/delta?$select=subject,isRead", page_size=2)
    new = deliver(sandbox, 3)
    sandbox.mark_outlook_read(ADDRESS, [read])
    sandbox.delete_outlook(ADDRESS, [deleted])

    items, next_link, _ = graph.delta_round(delta_link, page_size=2)

    by_id = {i["id"]: i for i in items}
    assert set(by_id) == {new, read, deleted}
    assert kept not in by_id
    assert by_id[read]["isRead"] is True and by_id[read]["subject"] == "Message 1"
    assert set(by_id[read]) == {"@odata.type", "@odata.etag", "id", "subject", "isRead"}  # the first $select
    assert by_id[deleted]["@removed"] == {"reason": "deleted"}
    assert graph.delta_round(next_link, page_size=2)[0] == []  # nothing changed since


def test_the_odata_key_form_and_a_folder_id_reach_the_same_inbox(sandbox: SandboxClient, graph: Graph) -> None:
    ids = [deliver(sandbox, n) for n in range(2)]
    inbox_id = sandbox.create_outlook_mailbox(ADDRESS)["inboxId"]

    for path in (
        "/me/mailfolders('inbox')/messages/delta",
        "/me/MailFolders('Inbox')/messages/delta",
        f"/me/mailFolders/{inbox_id}/messages/delta",
    ):
        assert [i["id"] for i in graph.delta_round(path, page_size=10)[0]] == ids


def test_immutable_ids_only_when_asked(sandbox: SandboxClient, graph: Graph) -> None:
    immutable = deliver(sandbox, 1)

    asked = graph.get("/me/mailFolders/inbox/messages/delta", prefer=[IMMUTABLE])
    not_asked = graph.get("/me/mailFolders/inbox/messages/delta")
    by_rest_id = graph.get(f"/me/messages/{not_asked.json()['value'][0]['id']}", prefer=[IMMUTABLE])

    assert asked.json()["value"][0]["id"] == immutable
    assert asked.headers["Preference-Applied"] == IMMUTABLE
    assert not_asked.json()["value"][0]["id"] != immutable
    assert "Preference-Applied" not in not_asked.headers
    assert by_rest_id.json()["id"] == immutable  # both forms open the same message


def test_preferences_work_comma_separated_or_in_repeated_headers(sandbox: SandboxClient, graph: Graph) -> None:
    immutable = [deliver(sandbox, n) for n in range(3)]
    url = f"{GRAPH}/me/mailFolders/inbox/messages/delta"
    auth = f"Bearer {graph.token}"
    # requests folds headers into a dict: urllib3 (under it) can send a header twice.
    pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=settings.MICROSOFT_CA_BUNDLE)
    repeated = pool.request(
        "GET",
        url,
        headers=urllib3.HTTPHeaderDict(
            [("Authorization", auth), ("Prefer", "odata.maxpagesize=2"), ("Prefer", IMMUTABLE)]
        ),
    )
    combined = graph.get(url, prefer=[f"odata.maxpagesize=2, {IMMUTABLE}"])

    for answer in (repeated.json(), combined.json()):
        assert [i["id"] for i in answer["value"]] == immutable[:2]
        assert "@odata.nextLink" in answer


def test_text_body_preference_converts_html(sandbox: SandboxClient, graph: Graph) -> None:
    message_id = deliver(sandbox, 5)

    answer = graph.get(f"/me/messages/{message_id}", prefer=['outlook.body-content-type="text"'])

    assert answer.json()["body"] == {"contentType": "text", "content": "Body of message 5."}
    assert answer.headers["Preference-Applied"] == 'outlook.body-content-type="text"'


def test_filter_on_received_date_and_only_that_filter(sandbox: SandboxClient, graph: Graph) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    deliver(sandbox, 1, received_at=now - timedelta(days=10))
    recent = deliver(sandbox, 2, received_at=now - timedelta(days=1))
    since = (now - timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")

    filtered = graph.get(
        "/me/mailFolders/inbox/messages/delta",
        prefer=[IMMUTABLE],
        params={"$filter": f"receivedDateTime ge {since}", "$select": "subject"},
    )
    wrong = graph.get("/me/mailFolders/inbox/messages/delta", params={"$filter": "subject eq 'x'"})

    assert [i["id"] for i in filtered.json()["value"]] == [recent]
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "BadRequest"


def test_an_expired_delta_token_gets_410_sync_state_not_found_with_a_fresh_url(
    sandbox: SandboxClient, graph: Graph
) -> None:
    deliver(sandbox, 1)
    _, delta_link, _ = graph.delta_round("/me/mailFolders/inbox/messages/delta?$select=subject", page_size=5)
    sandbox.expire_outlook_delta(ADDRESS)

    gone = graph.get(delta_link, prefer=[IMMUTABLE])

    assert gone.status_code == 410
    error = gone.json()["error"]
    assert error["code"] == "SyncStateNotFound"
    assert error["message"].startswith("The sync state generation is not found; generation=")
    assert {"request-id", "date"} <= error["innerError"].keys()
    fresh = gone.headers["Location"]
    assert fresh.startswith(f"{settings.SANDBOX_TLS_URL}/v1.0/") and "$select=subject" in fresh
    assert graph.delta_round(fresh, page_size=5)[0][0]["subject"] == "Message 1"


def test_an_expired_skip_token_gets_410_too(sandbox: SandboxClient, graph: Graph) -> None:
    for n in range(3):
        deliver(sandbox, n)
    first = graph.get("/me/mailFolders/inbox/messages/delta", prefer=["odata.maxpagesize=1"]).json()
    sandbox.expire_outlook_delta(ADDRESS)

    assert graph.get(first["@odata.nextLink"]).status_code == 410


def test_a_bad_token_gets_graphs_401_body(sandbox: SandboxClient, graph: Graph) -> None:
    answer = Graph("not-a-token").get("/me")
    sandbox.expire_microsoft_token(access_token=graph.token)
    expired = graph.get("/me")

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "InvalidAuthenticationToken"
    assert expired.status_code == 401
    assert "expired" in expired.json()["error"]["message"]


def test_me_names_the_mailbox(graph: Graph) -> None:
    me = graph.get("/me").json()

    assert me["mail"] == ADDRESS and me["userPrincipalName"] == ADDRESS
    assert me["displayName"] == "Grace"


def test_batch_of_twenty_gets_every_message_and_twenty_one_is_refused(sandbox: SandboxClient, graph: Graph) -> None:
    ids = [deliver(sandbox, n) for n in range(20)]
    sandbox.delete_outlook(ADDRESS, [ids[3]])

    def batch(message_ids: list[str]) -> requests.Response:
        body = {
            "requests": [
                {
                    "id": str(n),
                    "method": "GET",
                    "url": f"/me/messages/{m}?$select=subject",
                    "headers": {"Prefer": IMMUTABLE},
                }
                for n, m in enumerate(message_ids)
            ]
        }
        return graph.http.post(f"{GRAPH}/$batch", json=body, headers={"Authorization": f"Bearer {graph.token}"})

    answer = batch(ids)
    too_many = batch([*ids, ids[0]])

    assert answer.status_code == 200
    parts = {p["id"]: p for p in answer.json()["responses"]}
    assert len(parts) == 20
    assert parts["0"]["status"] == 200 and parts["0"]["body"]["id"] == ids[0]
    assert parts["0"]["body"]["subject"] == "Message 0"
    assert parts["3"]["status"] == 404 and parts["3"]["body"]["error"]["code"] == "ErrorItemNotFound"
    assert too_many.status_code == 400
    logged = [r for r in sandbox.requests("graph") if r["batch_part"]]
    assert len(logged) == 20 and logged[0]["path"] == f"/v1.0/me/messages/{ids[0]}"


def test_batch_ids_must_be_unique(graph: Graph) -> None:
    body = {"requests": [{"id": "a", "method": "GET", "url": "/me"}, {"id": "A", "method": "GET", "url": "/me"}]}
    answer = graph.http.post(f"{GRAPH}/$batch", json=body, headers={"Authorization": f"Bearer {graph.token}"})
    assert answer.status_code == 400


def test_a_fault_throttles_one_batch_part_with_its_own_retry_after(sandbox: SandboxClient, graph: Graph) -> None:
    ids = [deliver(sandbox, n) for n in range(3)]
    sandbox.fault("graph", 429, route=f"messages/{ids[1]}", headers={"Retry-After": "2.5"})
    body = {"requests": [{"id": str(n), "method": "GET", "url": f"/me/messages/{m}"} for n, m in enumerate(ids)]}

    answer = graph.http.post(f"{GRAPH}/$batch", json=body, headers={"Authorization": f"Bearer {graph.token}"})

    statuses = {p["id"]: p for p in answer.json()["responses"]}
    assert [statuses[str(n)]["status"] for n in range(3)] == [200, 429, 200]
    assert statuses["1"]["headers"]["Retry-After"] == "2.5"
    assert statuses["1"]["body"]["error"]["code"] == "TooManyRequests"


def test_a_throttled_request_gets_429_with_retry_after(sandbox: SandboxClient, graph: Graph) -> None:
    sandbox.fault("graph", 429, route="/messages/delta")

    answer = graph.get("/me/mailFolders/inbox/messages/delta")

    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "1"
    assert answer.json()["error"]["code"] == "TooManyRequests"


def test_the_demo_outlook_mailbox_loads_like_the_gmail_one(graph: Graph, sandbox_server: SandboxServer) -> None:
    state = sandbox_server.state
    load_demo_outlook(state, ADDRESS)
    load_demo_outlook(state, ADDRESS)  # a second seeding adds nothing

    items, _, _ = graph.delta_round("/me/mailFolders/inbox/messages/delta", page_size=50)

    assert len(items) == len(demo_messages(datetime.now(UTC)))
    assert {i["body"]["contentType"] for i in items} == {"html", "text"}
    assert all(i["internetMessageId"].startswith("<demo.") and i["isRead"] is False for i in items)
    assert all(i["bodyPreview"] for i in items)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/graph/mailboxes", {"address": "not-an-address"}, "address"),
        ("/graph/messages", {"address": ADDRESS}, "body"),
        ("/graph/messages", {"address": ADDRESS, "raw": "x", "subject": "y"}, "body"),
        ("/graph/messages/read", {"address": ADDRESS, "ids": []}, "ids"),
        ("/graph/messages/read", {"address": ADDRESS, "ids": ["x"], "flag": "purple"}, "flag"),
        ("/graph/expire-delta", {}, "address"),
        ("/microsoft/tokens", {"address": ADDRESS, "expires_in": -1}, "expires_in"),
        ("/microsoft/tokens/revoke", {}, "body"),
    ],
)
def test_control_api_names_the_wrong_field(
    sandbox: SandboxClient, graph: Graph, path: str, body: dict[str, Any], field: str
) -> None:
    with pytest.raises(SandboxControlError) as error:
        sandbox.call("POST", path, json=body)

    assert error.value.status == 400
    assert field in error.value.body


def test_control_api_404s_unknown_mailboxes_and_messages(sandbox: SandboxClient, graph: Graph) -> None:
    with pytest.raises(SandboxControlError) as unknown_mailbox:
        sandbox.deliver_outlook("nobody@example.com", subject="x")
    with pytest.raises(SandboxControlError) as unknown_message:
        sandbox.delete_outlook(ADDRESS, ["AAkALgAAAAAAHYQDEapmEc2byACqAC-EWg0Anope"])

    assert unknown_mailbox.value.status == 404 and unknown_message.value.status == 404
