"""A run's outcome in one plain sentence. The technical detail (the provider's or Gemini's error text)
stays in the run record and the logs; a person reads what happened and what to do."""

from __future__ import annotations

from dataclasses import dataclass

from django import template
from django.http import HttpRequest

from accounts.models import User
from extraction.looking import RunChanges, RunsSince, run_changes_since, runs_since
from extraction.models import ExtractionRun
from extraction.runrecord import STOPPED
from extraction.selectors import mailboxes_to_reconnect
from extraction.services import WORKER_LOST
from integrations.models import FIRST_READ, Integration, SyncCursor

register = template.Library()


@dataclass(frozen=True)
class Problem:
    sentence: str  # without its full stop: the page adds ": <fix>." or "."
    fix_url_name: str = ""  # a page that fixes it, when there is one
    fix_text: str = ""
    warning: bool = False  # the run did its work, but not all of it


_MAILBOX_FIX = ("mailboxes", "fix it on the Mailboxes page")
_RECONNECT = ("mailboxes", "reconnect on the Mailboxes page")

PROBLEMS: dict[str, Problem] = {
    "no_consent": Problem("Nothing was read, because Tasklift has no AI consent", "consent", "give consent"),
    "consent_revoked": Problem("The read stopped, because AI consent was revoked", "consent", "review your consent"),
    "no_mailbox": Problem("Nothing was read, because no mailbox is connected", "mailboxes", "connect one"),
    "provider_auth": Problem(
        "A mailbox no longer lets Tasklift read it", "mailboxes", "reconnect it on the Mailboxes page"
    ),
    "provider_rate_limited": Problem("Your mail provider asked Tasklift to slow down; the next read tries again"),
    "provider_unavailable": Problem("Your mail provider could not be reached; the next read tries again"),
    "provider_error": Problem("Your mail could not be read just now; the next read tries again"),
    "cursor_expired": Problem("A mailbox has to be read again from an earlier point; the next read does it"),
    "cursor_conflict": Problem("A mailbox changed during the read; nothing was lost and the next read goes on"),
    "lease_lost": Problem("Another read of yours took over from this one; nothing was lost"),
    "busy": Problem("Another read of yours took too long, so this one did not start"),
    "queue_unavailable": Problem("This read could not be started just now; try again in a minute"),
}
LLM_PROBLEM = Problem("The AI could not be reached; your tasks so far are kept and the next read goes on")
OTHER_PROBLEM = Problem("This read did not finish; the next read tries again and nothing was lost")


@register.filter
def run_problem(run: ExtractionRun | None) -> Problem | None:
    """What went wrong with a finished run, or None when nothing did."""
    if run is None or not run.is_finished or not (run.error_code or run.status == ExtractionRun.Status.FAILED):
        return None
    if run.error_code == "partial":
        names = " and ".join(left_out(run)) or "one of your mailboxes"
        return Problem(f"Tasklift read your mail, but not all of {names}", *_MAILBOX_FIX, warning=True)
    if run.error_code == "needs_reauth":
        # Named as they stand now: one reconnected since this run needs nothing more.
        names = " and ".join(str(i) for i in mailboxes_to_reconnect(user_id=run.user_id))
        if names:
            return Problem(f"Nothing was read, because {names} must be reconnected", *_RECONNECT)
        return None
    if run.error_code.startswith("llm_"):
        return LLM_PROBLEM
    if run.error_code == WORKER_LOST:  # its runner kept dying: read again at once, unless this was that retry
        if run.trigger == ExtractionRun.Trigger.RETRY:
            return Problem(
                "This read stopped unexpectedly again; nothing was lost, and the next regular check reads your mail"
            )
        return Problem("This read stopped unexpectedly; nothing was lost, and Tasklift reads your mail again now")
    if run.error_code == STOPPED:  # its message counts what it read: "Stopped: 20 emails read before you stopped…"
        return Problem(run.error_message.removesuffix("."), warning=True)
    return PROBLEMS.get(run.error_code, OTHER_PROBLEM if run.status == ExtractionRun.Status.FAILED else None)


@register.filter
def left_out(run: ExtractionRun) -> list[str]:
    """The mailboxes a run could not read completely ("Gmail a@b.c"), for its warning."""
    return [
        f"{m.get('provider', '').capitalize()} {m.get('address', '')}".strip()
        + (" (Sent mail)" if m.get("folder") == "sent" else "")
        for m in run.mailboxes.values()
        if isinstance(m, dict) and m.get("status") in ("failed", "partial")
    ]


@register.simple_tag(takes_context=True)
def runs_since_looked(context: template.Context) -> RunsSince | None:
    """The runs finished since the person last looked, for the run line (None outside a signed-in page)."""
    signed_in = _signed_in(context)
    return runs_since(request=signed_in[0], user=signed_in[1]) if signed_in else None


@register.simple_tag(takes_context=True)
def run_changes_since_looked(context: template.Context) -> RunChanges | None:
    """What those runs did to existing items, for the run line (None outside a signed-in page)."""
    signed_in = _signed_in(context)
    return run_changes_since(request=signed_in[0], user=signed_in[1]) if signed_in else None


def _signed_in(context: template.Context) -> tuple[HttpRequest, User] | None:
    """The page's request and its person, on a signed-in page."""
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return None
    return request, request.user


@register.filter
def first_sent_reads(run: ExtractionRun) -> list[Integration]:
    """The person's mailboxes whose Sent mail is being read for the first time by this run, while it runs (one
    query; none once it has finished: the cursor then has its position)."""
    if run.is_finished:
        return []
    return list(
        Integration.objects.filter(
            user_id=run.user_id,
            status=Integration.Status.ACTIVE,
            cursors__purpose=SyncCursor.Purpose.SENT_MAIL,
            cursors__value=FIRST_READ,
        ).order_by("pk")
    )
