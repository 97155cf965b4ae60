"""The extraction run's promises (DESIGN §1, §5, §7), through the sandbox, on real PostgreSQL and Redis."""

from __future__ import annotations

import json

import pytest

from accounts.models import User
from accounts.services import consent_revoke
from extraction.models import ExtractionRun, ProcessedEmail
from integrations.models import SyncCursor
from sandbox.client import SandboxClient
from tasks.models import Task
from tests.conftest import GmailBox, OutlookBox, run_extraction
from tests.mail import ask, no_ask, rfc822

pytestmark = pytest.mark.django_db


def gemini_calls(sandbox: SandboxClient) -> list[dict]:
    return [r for r in sandbox.requests("gemini") if r["method"] == "POST"]


def prompt_of(call: dict) -> str:
    return "".join(part["text"] for part in json.loads(call["body"])["contents"][0]["parts"])


def emails_in(call: dict) -> int:
    return prompt_of(call).count('<email id="email_')


def test_25_new_emails_make_3_gemini_calls_and_move_the_cursor(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(25)]
    new_history_id = gmail.history_id()

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert sorted(emails_in(c) for c in gemini_calls(sandbox)) == [5, 10, 10]  # calls run in parallel
    titles = dict(Task.objects.filter(user=consenting_user).values_list("source_id", "title"))
    assert titles == {ids[n]: f"Send the report for project {n} by Friday" for n in range(25)}  # each its own
    assert gmail.cursor == new_history_id
    assert set(ProcessedEmail.objects.values_list("message_id", flat=True)) == set(ids)
    assert (run.emails_fetched, run.emails_sent_to_llm, run.tasks_created, run.llm_calls) == (25, 25, 25, 3)
    assert run.prompt_tokens > 0 and run.output_tokens > 0
    assert run.mailboxes[str(gmail.integration.pk)]["after"] == new_history_id


def test_tasks_keep_the_link_sender_subject_and_due_date(gmail: GmailBox, consenting_user: User) -> None:
    message_id = gmail.deliver(rfc822("Budget", "Could you urgently review the budget by 2026-12-04?"))
    run_extraction(consenting_user)
    task = Task.objects.get(user=consenting_user)
    assert task.source_id == message_id
    assert message_id in task.email_link and task.email_link.startswith("https://mail.google.com/")
    assert task.email_sender == "Alex Colleague <alex@example.com>"
    assert task.email_subject == "Budget"
    assert str(task.due_date) == "2026-12-04"
    assert task.priority == "high"
    assert task.email_received_at is not None


def test_gemini_failing_on_the_second_batch_keeps_the_cursor_and_the_first_batch(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    for n in range(25):
        gmail.deliver(ask(n))
    before = gmail.cursor
    # Gemini's quota runs out at batch 2 (project 10 is its first email): the same for every email.
    sandbox.fault("gemini", 429, times=None, match="project 10 ", headers={"Retry-After": "0"})

    failed = run_extraction(consenting_user)

    assert failed.status == ExtractionRun.Status.FAILED
    assert failed.error_code == "llm_rate_limited"
    assert "no mailbox position moved" in failed.error_message
    assert gmail.cursor == before
    assert Task.objects.filter(user=consenting_user).count() == 10
    assert ProcessedEmail.objects.count() == 10

    sandbox.clear_faults()
    sandbox.clear_requests()
    retried = run_extraction(consenting_user)

    assert retried.status == ExtractionRun.Status.SUCCEEDED
    assert [emails_in(c) for c in gemini_calls(sandbox)] == [10, 5]
    assert (retried.emails_fetched, retried.emails_already_done, retried.emails_sent_to_llm) == (25, 10, 15)
    assert Task.objects.filter(user=consenting_user).count() == 25
    assert gmail.cursor == gmail.history_id()


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, None),  # a 5xx that follows the email's content
        (
            400,
            {"error": {"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}},
        ),
        (200, {"promptFeedback": {"blockReason": "SAFETY"}}),  # a safety block
    ],
)
def test_an_email_that_makes_gemini_fail_is_quarantined_and_the_rest_proceeds(
    status: int, body: object, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(14)]
    poison = ids[6]  # "project 6": in the first batch, with nine good emails around it
    sandbox.fault("gemini", status, body=body, times=None, match="project 6 ")

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert set(Task.objects.values_list("source_id", flat=True)) == set(ids) - {poison}
    entry = ProcessedEmail.objects.get(outcome="quarantined")
    assert entry.message_id == poison
    assert run.emails_quarantined == 1
    assert ProcessedEmail.objects.count() == 14
    assert gmail.cursor == gmail.history_id()  # it may move: the poison is set aside where a person sees it

    sandbox.clear_faults()  # the fault is gone: a replay brings its task back
    from extraction.services import ledger_replay

    ledger_replay(entries=[entry])
    run_extraction(consenting_user)
    assert Task.objects.filter(source_id=poison).count() == 1


def test_a_gemini_outage_quarantines_nothing_and_moves_no_cursor(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    for n in range(14):
        gmail.deliver(ask(n))
    before = gmail.cursor
    sandbox.fault("gemini", 503, times=None)  # every call, the probe's too

    run = run_extraction(consenting_user)

    assert (run.status, run.error_code) == (ExtractionRun.Status.FAILED, "llm_unavailable")
    assert ProcessedEmail.objects.count() == 0
    assert gmail.cursor == before
    assert "probe@tasklift.invalid" in gemini_calls(sandbox)[-1]["body"]  # it asked before setting anything aside


def test_a_passing_404_on_a_message_read_loses_no_email(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(5)]
    sandbox.fault("gmail", 404, route=f"^GET /gmail/v1/users/me/messages/{ids[2]}\\?", times=1)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert set(Task.objects.values_list("source_id", flat=True)) == set(ids)
    assert not ProcessedEmail.objects.filter(last_error="deleted").exists()


def test_one_message_that_always_fails_to_read_is_quarantined_and_blocks_nothing(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(60)]
    broken = ids[10]  # in the first fetch chunk of 20: the chunks after it must still be read
    sandbox.fault("gmail", 500, route=f"^GET /gmail/v1/users/me/messages/{broken}\\?", times=None)
    before = gmail.cursor

    first = run_extraction(consenting_user)

    assert first.status == ExtractionRun.Status.SUCCEEDED
    assert first.error_code == "partial"
    assert "could not be read" in first.error_message
    assert first.mailboxes[str(gmail.integration.pk)]["unread"] == 1
    assert Task.objects.count() == 59
    assert gmail.cursor == before  # the broken one is not handled yet: the promise holds the cursor

    for _ in range(settings.EXTRACTION_FETCH_ATTEMPTS - 1):
        last = run_extraction(consenting_user)
    assert last.emails_quarantined == 1
    entry = ProcessedEmail.objects.get(message_id=broken)
    assert entry.outcome == "quarantined"
    assert entry.last_error.startswith("fetch_provider_unavailable")
    assert gmail.cursor == gmail.history_id()  # set aside where a person sees it: the cursor moves
    assert Task.objects.count() == 59

    sandbox.clear_faults()
    from extraction.services import ledger_replay

    ledger_replay(entries=[entry])
    run_extraction(consenting_user)
    assert Task.objects.count() == 60


def test_a_mailbox_whose_every_read_fails_is_left_out_and_nothing_is_set_aside(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    for n in range(5):
        gmail.deliver(ask(n))
    sandbox.fault("gmail", 500, route="^GET /gmail/v1/users/me/messages/", times=None)  # every message read
    before = gmail.cursor

    for _ in range(settings.EXTRACTION_FETCH_ATTEMPTS + 1):
        run = run_extraction(consenting_user)

    assert run.mailboxes[str(gmail.integration.pk)]["error_code"] == "provider_unavailable"
    assert not ProcessedEmail.objects.exists()  # an outage of message reads sets nothing aside
    assert gmail.cursor == before


def test_an_email_gemini_fails_on_once_is_read_again_before_it_is_set_aside(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    message_id = gmail.deliver(ask(1))
    sandbox.fault("gemini", 503, times=settings.GEMINI_MAX_ATTEMPTS, match="project 1 ")  # a burst of 503s

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.get().source_id == message_id
    assert run.emails_quarantined == 0


def test_a_rate_limit_403_never_sends_a_mailbox_to_reconnecting(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    body = {
        "error": {
            "code": 403,
            "message": "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute per user'.",
            "errors": [{"message": "Rate Limit Exceeded", "domain": "usageLimits", "reason": "rateLimitExceeded"}],
            "status": "PERMISSION_DENIED",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED"}],
        }
    }
    sandbox.fault("gmail", 403, body=body, route="/history", times=None)

    run_extraction(consenting_user)

    gmail.integration.refresh_from_db()
    assert gmail.integration.status == "active"
    assert gmail.integration.last_error_code == "provider_rate_limited"


def test_retries_of_a_transient_gemini_error_are_counted_on_the_run(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    sandbox.fault("gemini", 503, times=2)
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert len(gemini_calls(sandbox)) == 3
    assert run.llm_calls == 3


def test_the_same_delta_processed_twice_creates_no_new_task(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    for n in range(12):
        gmail.deliver(ask(n))
    before = gmail.cursor
    run_extraction(consenting_user)
    assert Task.objects.count() == 12

    # As if the run had died after writing its tasks but before committing anything else.
    SyncCursor.objects.filter(integration=gmail.integration).update(value=before)
    ProcessedEmail.objects.all().delete()
    sandbox.clear_requests()
    again = run_extraction(consenting_user)

    assert again.status == ExtractionRun.Status.SUCCEEDED
    assert again.emails_sent_to_llm == 12
    assert again.tasks_created == 0
    assert Task.objects.count() == 12


def test_mail_already_in_the_ledger_is_never_sent_again(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    for n in range(3):
        gmail.deliver(ask(n))
    before = gmail.cursor
    run_extraction(consenting_user)
    SyncCursor.objects.filter(integration=gmail.integration).update(value=before)
    sandbox.clear_requests()

    again = run_extraction(consenting_user)

    assert gemini_calls(sandbox) == []
    assert (again.emails_fetched, again.emails_already_done, again.emails_sent_to_llm) == (3, 3, 0)
    assert gmail.cursor == gmail.history_id()


def test_without_consent_the_run_is_skipped_before_any_request(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    before = gmail.cursor
    consent_revoke(user=consenting_user)
    sandbox.clear_requests()

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SKIPPED
    assert run.error_code == "no_consent"
    assert sandbox.requests("gmail") == []
    assert sandbox.requests("gemini") == []
    assert gmail.cursor == before


def test_no_provider_message_id_appears_in_a_gemini_request(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(12)]
    thread_ids = [m["threadId"] for m in sandbox.mailbox_messages(gmail.address)]
    run_extraction(consenting_user)
    bodies = [c["body"] for c in gemini_calls(sandbox)]
    assert len(bodies) == 2
    for body in bodies:
        for provider_id in ids + thread_ids:
            assert provider_id not in body
        assert '<email id="email_1">' in prompt_of({"body": body})


def test_no_new_mail_means_no_gemini_call_and_a_successful_run(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert gemini_calls(sandbox) == []


def test_emails_without_asks_are_recorded_as_handled(gmail: GmailBox, consenting_user: User) -> None:
    gmail.deliver(no_ask(1))
    gmail.deliver(ask(2))
    run_extraction(consenting_user)
    outcomes = dict(ProcessedEmail.objects.values_list("outcome", "tasks_created"))
    assert outcomes == {"no_tasks": 0, "tasks": 1}


BAD_ANSWERS = {
    "unknown_id": {"emails": [{"email_id": "email_1", "tasks": []}, {"email_id": "email_7", "tasks": []}]},
    "duplicate_id": {"emails": [{"email_id": "email_1", "tasks": []}, {"email_id": "email_1", "tasks": []}]},
    "too_many_tasks": {
        "emails": [
            {
                "email_id": "email_1",
                "tasks": [{"title": f"Task {i}", "due_date": None, "priority": "low"} for i in range(50)],
            }
        ]
    },
    "title_too_long": {
        "emails": [{"email_id": "email_1", "tasks": [{"title": "x" * 5000, "due_date": None, "priority": None}]}]
    },
}


def scripted_answer(code: str) -> str:
    if code == "not_json":
        return "SANDBOX-ECHO-TEXT: this is not json"
    return f"SANDBOX-ECHO-JSON: {json.dumps(BAD_ANSWERS[code])}"


@pytest.mark.parametrize("code", [*BAD_ANSWERS, "not_json"])
def test_a_bad_gemini_answer_is_rejected_and_nothing_wrong_is_written(
    code: str, gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_MAX_BODY_CHARS = 20_000  # room for the scripted answer in the email
    message_id = gmail.deliver(rfc822("Odd one", f"Please look at this.\n{scripted_answer(code)}\n"))

    run = run_extraction(consenting_user)

    assert [r["code"] for r in run.rejections] == [code, code]  # tried twice, rejected twice
    assert Task.objects.count() == 0
    # The email is set aside where a person can see and replay it; only then does the cursor move.
    entry = ProcessedEmail.objects.get()
    assert (entry.message_id, entry.outcome) == (message_id, "quarantined")
    assert entry.last_error.startswith(f"llm_{code}")
    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert run.emails_quarantined == 1
    assert gmail.cursor == gmail.history_id()


def test_a_poison_email_is_isolated_and_the_rest_of_its_batch_proceeds(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    ids = [gmail.deliver(ask(n)) for n in range(4)]
    poison = gmail.deliver(rfc822("Odd one", f"Please look at this.\n{scripted_answer('unknown_id')}\n"))
    ids += [gmail.deliver(ask(n)) for n in range(4, 9)]

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 9
    assert set(Task.objects.values_list("source_id", flat=True)) == set(ids)
    assert ProcessedEmail.objects.get(outcome="quarantined").message_id == poison
    assert run.emails_quarantined == 1


def test_a_replayed_quarantined_email_is_read_again_by_the_next_run(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    from extraction.services import ledger_replay

    settings.EXTRACTION_MAX_BODY_CHARS = 20_000
    message_id = gmail.deliver(rfc822("Odd one", f"Please look at this.\n{scripted_answer('not_json')}\n"))
    run_extraction(consenting_user)
    assert ledger_replay(entries=list(ProcessedEmail.objects.all())) == 1
    sandbox.clear_requests()

    again = run_extraction(consenting_user)

    assert again.emails_fetched == 1  # fetched by id although the cursor is past it
    assert len(gemini_calls(sandbox)) == 2  # still poison: tried twice, quarantined again
    assert ProcessedEmail.objects.get().message_id == message_id


def test_an_expired_history_is_resynced_by_itself_and_no_email_is_lost(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(0))
    assert run_extraction(consenting_user).status == ExtractionRun.Status.SUCCEEDED
    ids = [gmail.deliver(ask(n) if n % 2 else no_ask(n)) for n in range(1, 131)]  # 130 unread, 65 asks
    sandbox.expire_history(gmail.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert (run.emails_fetched, run.emails_already_done) == (130, 0)  # the handled one is not even listed
    assert ProcessedEmail.objects.filter(message_id__in=ids).count() == 130
    assert Task.objects.count() == 66
    cursor = SyncCursor.objects.get(integration=gmail.integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION)
    assert (cursor.value, cursor.generation) == (gmail.history_id(), 2)
    gmail.integration.refresh_from_db()
    assert gmail.integration.status == "active"  # no person involved
    assert gmail.integration.resynced_at is not None and gmail.integration.resync_not_read == 0
    note = run.mailboxes[str(gmail.integration.pk)]["note"]
    assert note.startswith("Because the provider had forgotten where Tasklift stopped reading, Tasklift read again")


def test_a_resync_over_its_bound_counts_and_shows_what_was_not_read(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User, settings
) -> None:
    settings.EXTRACTION_RESYNC_MAX_MESSAGES = 100
    for n in range(130):
        gmail.deliver(ask(n))
    sandbox.expire_history(gmail.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 100  # the newest hundred
    assert run.mailboxes[str(gmail.integration.pk)]["not_read"] == 30
    assert "30 older emails" in run.mailboxes[str(gmail.integration.pk)]["note"]
    gmail.integration.refresh_from_db()
    assert gmail.integration.resync_not_read == 30


def test_a_resync_that_fails_half_way_keeps_the_old_cursor_and_is_done_again(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    for n in range(25):
        gmail.deliver(ask(n))
    sandbox.expire_history(gmail.address)
    before = gmail.cursor
    sandbox.fault("gemini", 429, times=None, match="project 10 ", headers={"Retry-After": "0"})

    failed = run_extraction(consenting_user)

    assert failed.status == ExtractionRun.Status.FAILED
    assert gmail.cursor == before  # replaced only when the resync has committed
    sandbox.clear_faults()
    sandbox.clear_requests()

    again = run_extraction(consenting_user)

    assert again.status == ExtractionRun.Status.SUCCEEDED
    assert Task.objects.count() == 25
    assert [emails_in(c) for c in gemini_calls(sandbox)] == [10, 5]  # the first batch is not sent again
    assert (
        SyncCursor.objects.get(integration=gmail.integration, purpose=SyncCursor.Purpose.TASK_EXTRACTION).generation
        == 2
    )


def test_a_refused_refresh_marks_the_mailbox_for_reconnecting(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(ask(1))
    before = gmail.cursor
    sandbox.revoke(address=gmail.address)

    run = run_extraction(consenting_user)

    gmail.integration.refresh_from_db()
    assert gmail.integration.status == "needs_reauth"
    assert run.status == ExtractionRun.Status.FAILED
    assert run.mailboxes[str(gmail.integration.pk)]["error_code"] == "provider_auth"
    assert gmail.address in run.error_message
    assert gmail.cursor == before


def test_a_run_whose_every_mailbox_needs_reconnecting_asks_to_reconnect_them_by_name(
    gmail: GmailBox, outlook: OutlookBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    from integrations.models import Integration

    gmail.deliver(ask(1))
    sandbox.revoke(address=gmail.address)
    run_extraction(consenting_user)  # Gmail's refresh refused: it needs reconnecting
    Integration.objects.filter(pk=outlook.integration.pk).update(status=Integration.Status.NEEDS_REAUTH)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SKIPPED
    assert run.error_code == "needs_reauth"
    assert run.error_message == (
        f"Skipped: Gmail {gmail.address} and Outlook {outlook.address} no longer let Tasklift read them. "
        "Reconnect them on the Mailboxes page."
    )
    assert "Connect Gmail or Outlook" not in run.error_message


def test_a_run_with_no_mailbox_at_all_asks_to_connect_one(consenting_user: User) -> None:
    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SKIPPED
    assert (run.error_code, run.error_message) == (
        "no_mailbox",
        "Skipped: no connected mailbox to read. Connect Gmail or Outlook.",
    )


def test_an_expired_access_token_is_refreshed_and_saved_encrypted(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    from integrations.services import integration_credentials

    gmail.deliver(ask(1))
    old_token = integration_credentials(integration=gmail.integration)["token"]
    sandbox.expire_token(address=gmail.address)

    run = run_extraction(consenting_user)

    assert run.status == ExtractionRun.Status.SUCCEEDED
    gmail.integration.refresh_from_db()
    new_token = integration_credentials(integration=gmail.integration)["token"]
    assert new_token != old_token
    assert new_token not in gmail.integration.credentials_encrypted


def test_query_count_per_batch_does_not_depend_on_the_number_of_tasks(gmail: GmailBox, consenting_user: User) -> None:
    from extraction.pipeline import ExtractionPipeline

    for n in range(10):
        gmail.deliver(ask(n))
    for n in range(10):
        gmail.deliver(no_ask(n))
    run = ExtractionRun.objects.create(user=consenting_user, trigger=ExtractionRun.Trigger.ADMIN)
    pipeline = ExtractionPipeline(run)
    pipeline.execute()
    stats = pipeline.batch_stats
    assert [s.tasks for s in stats] == [10, 0]
    assert stats[0].queries == stats[1].queries


def test_the_run_record_reads_as_json_from_the_extract_command(gmail: GmailBox, consenting_user: User) -> None:
    from io import StringIO

    from django.core.management import call_command

    gmail.deliver(ask(1))
    out = StringIO()
    call_command("extract", consenting_user.email, stdout=out)
    record = json.loads(out.getvalue())
    assert record["status"] == "succeeded"
    assert record["trigger"] == "admin"
    assert record["counts"]["tasks_created"] == 1
    assert record["mailboxes"][0]["after"] == gmail.cursor


def test_the_extract_command_refuses_an_unknown_person(db: None) -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="No account"):
        call_command("extract", "nobody@example.com")


def test_a_nul_character_in_an_email_does_not_block_the_mailbox(
    gmail: GmailBox, sandbox: SandboxClient, consenting_user: User
) -> None:
    gmail.deliver(rfc822("=?utf-8?b?QQBC?=", "Please send the report for project 7 by Friday."))  # subject "A\0B"
    run = run_extraction(consenting_user)
    assert run.status == ExtractionRun.Status.SUCCEEDED, run.error_message
    assert Task.objects.get().email_subject == "AB"
