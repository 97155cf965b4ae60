"""The idle check: whether anything changed in a chunk of due mailboxes, for one provider call a mailbox.

An idle check is not a run. It takes no lease, writes no run row and reads no message: for each mailbox of
a person with current AI consent (no consent, no provider call: DESIGN §7.3) it asks each cursor's delta
(one Gmail `history.list` for both folders, a Graph $batch of both folders' delta links), with the token
refreshed only when it has expired. A mailbox with nothing new gets its `checked_at` and nothing else. Where
there is mail, or the cursor cannot be read from (expired, another query), or mail is queued on the mailbox,
a real run is requested, and the run does what a run does (lease, consent, ledger, record). A refused or
throttled call is recorded as a run's would be (`integration_mark_failed`): the mailbox waits its backoff.

Nothing here moves a cursor past mail: a delta that lists nothing the ledger lacks says there is no mail
between the cursor and the delta's own position, so that position is saved (a compare-and-swap on the old
value) once a day, so that a quiet mailbox's cursor never grows old enough to expire.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Exists, OuterRef
from django.utils import timezone

from accounts.models import AIConsent
from extraction.models import ExtractionRun, ProcessedEmail
from extraction.scheduling import extraction_runs_request_many
from integrations.models import FIRST_READ, Integration, PushChannel, SyncCursor
from integrations.providers.base import FOLDERS, CursorExpired, Folder, MailProvider, ProviderError, provider_close
from integrations.services import (
    cursor_fits,
    integration_mark_failed,
    integration_provider,
    integration_save_refreshed_credentials,
)

logger = logging.getLogger(__name__)

CHECK_THREADS = 8  # provider calls of one job in flight at once (waiting on the network, not the CPU)
CURSOR_REFRESH = timedelta(hours=24)  # a quiet mailbox's cursor is moved to "now" this often


@dataclass
class CheckResult:
    checked: int = 0  # mailboxes asked
    calls: int = 0  # provider calls made
    quiet: int = 0  # nothing new
    with_mail: int = 0  # mail (or a resync) found: a run requested
    failed: int = 0  # the provider refused or failed
    skipped: int = 0  # not asked: no consent, not active
    runs_queued: int = 0
    cursors_refreshed: int = 0


@dataclass
class _Box:
    integration: Integration
    cursors: list[SyncCursor]
    provider: MailProvider | None = None
    positions: dict[int, str] = field(default_factory=dict)  # cursor id -> the delta's position
    listed: set[tuple[str, str]] = field(default_factory=set)  # (cursor purpose, message id)
    needs_run: bool = False
    error: ProviderError | None = None
    calls: int = 0


def cursor_folder(value: str) -> Folder:
    """The folder a cursor follows: an inbox cursor is the bare position, any other carries its folder."""
    return next((f for f in FOLDERS if f != "inbox" and value.startswith(f"{f}:")), "inbox")


def mailboxes_idle_check(*, integration_ids: list[int], now: datetime | None = None) -> CheckResult:
    """Check these mailboxes (a chunk the scan claimed) and request runs where there is mail."""
    now = now or timezone.now()
    result = CheckResult()
    consenting = AIConsent.objects.in_force().filter(user=OuterRef("user_id"))  # an earlier text read as it said
    integrations = list(
        Integration.objects.filter(pk__in=integration_ids, status=Integration.Status.ACTIVE, user__is_active=True)
        .filter(Exists(consenting))
        .order_by("pk")
    )
    result.skipped = len(integration_ids) - len(integrations)
    cursors: dict[int, list[SyncCursor]] = {}
    for cursor in SyncCursor.objects.filter(integration_id__in=[i.pk for i in integrations]).order_by("pk"):
        cursors.setdefault(cursor.integration_id, []).append(cursor)
    boxes = [_Box(i, cursors.get(i.pk, [])) for i in integrations]
    for box in boxes:
        _prepare(box)
    with ThreadPoolExecutor(max_workers=CHECK_THREADS) as pool:
        list(pool.map(_ask, [b for b in boxes if b.provider is not None and not b.needs_run]))
    for box in boxes:
        provider_close(box.provider)
    _compare_with_ledger([b for b in boxes if b.listed and not b.needs_run])
    result.checked = len(boxes)
    result.calls = sum(b.calls for b in boxes)
    for box in boxes:
        if box.error is not None:
            integration_mark_failed(integration=box.integration, error=box.error)
            result.failed += 1
        elif box.provider is not None:
            integration_save_refreshed_credentials(integration=box.integration, provider=box.provider)
    quiet = [b for b in boxes if b.error is None and not b.needs_run]
    found = [b for b in boxes if b.error is None and b.needs_run]
    result.quiet, result.with_mail = len(quiet), len(found)
    if quiet:
        Integration.objects.filter(pk__in=[b.integration.pk for b in quiet]).update(checked_at=now)
        result.cursors_refreshed = _refresh_cursors(quiet, now)
    if found:
        _note_missed_pushes(found, now)
        result.runs_queued = extraction_runs_request_many(
            user_ids={b.integration.user_id for b in found}, trigger=ExtractionRun.Trigger.SCHEDULE
        )
    logger.info("idle check of %d mailboxes: %s", len(integration_ids), result)
    return result


def _prepare(box: _Box) -> None:
    """What can be told without asking: mail queued on the mailbox, a cursor to resync, no cursor."""
    integration = box.integration
    if integration.backfill_pending or not box.cursors or any(c.value == FIRST_READ for c in box.cursors):
        box.needs_run = True  # mail queued, or a first read (Sent mail after consent to it) to do
        return
    if any(not cursor_fits(cursor=c, integration=integration) for c in box.cursors):
        box.needs_run = True  # a cursor of another query: the run resyncs it
        return
    try:
        box.provider = integration_provider(integration=integration)
    except ProviderError as error:
        box.error = error


def _ask(box: _Box) -> None:
    """The provider call (a thread of the pool: no database here): one for all the mailbox's folders (a
    Gmail history listing over every label, a Graph $batch of each folder's delta), and more only for a
    delta of several pages or a part Graph failed."""
    assert box.provider is not None
    by_folder = {cursor_folder(c.value): c for c in box.cursors}
    box.calls += 1
    try:
        deltas = box.provider.fetch_deltas({folder: c.value for folder, c in by_folder.items()})
    except CursorExpired:
        box.needs_run = True  # the run resyncs it (DESIGN §6)
        return
    except ProviderError as error:
        box.error = error
        return
    for folder, delta in deltas.items():
        cursor = by_folder[folder]
        box.listed.update((cursor.purpose, message_id) for message_id in delta.message_ids)
        box.positions[cursor.pk] = delta.new_cursor


def _compare_with_ledger(boxes: list[_Box]) -> None:
    """Mail listed that the ledger does not hold means a run (one statement for the chunk). Graph lists
    mail again when it is only read or flagged: that is not new."""
    wanted = {b.integration.pk: b for b in boxes}
    known: dict[int, set[tuple[str, str]]] = {}
    rows = ProcessedEmail.objects.filter(
        integration_id__in=list(wanted), message_id__in=list({m for b in boxes for _, m in b.listed})
    ).values_list("integration_id", "purpose", "message_id")
    for integration_id, purpose, message_id in rows:  # the ledger is kept per folder (purpose)
        known.setdefault(integration_id, set()).add((purpose, message_id))
    for integration_id, box in wanted.items():
        box.needs_run = bool(box.listed - known.get(integration_id, set()))


def _refresh_cursors(boxes: list[_Box], now: datetime) -> int:
    """Move day-old cursors of quiet mailboxes to where their delta stood: nothing lies between. A
    compare-and-swap on the old value, and only while no run of the person is queued or running: a run
    that read from the old value would otherwise find its cursor moved and fail (nothing lost, a run
    wasted)."""
    refreshed = 0
    for box in boxes:
        busy = ExtractionRun.objects.filter(
            user_id=box.integration.user_id, status__in=[ExtractionRun.Status.QUEUED, ExtractionRun.Status.RUNNING]
        )
        for cursor in box.cursors:
            position = box.positions.get(cursor.pk)
            if not position or position == cursor.value or cursor.updated_at > now - CURSOR_REFRESH:
                continue
            refreshed += (
                SyncCursor.objects.filter(pk=cursor.pk, value=cursor.value)
                .exclude(Exists(busy))
                .update(value=position, updated_at=now)
            )
    return refreshed


def _note_missed_pushes(boxes: list[_Box], now: datetime) -> None:
    """A mailbox with a push channel where a check found mail and no ring came since its last read: its push
    missed that mail, so it counts as without push (polled every EXTRACTION_SCHEDULE_MINUTES) until it
    rings again."""
    with_channel = set(
        PushChannel.objects.filter(integration_id__in=[b.integration.pk for b in boxes]).values_list(
            "integration_id", flat=True
        )
    )
    missed = [b.integration.pk for b in boxes if b.integration.pk in with_channel and b.listed and _unrung(b)]
    if missed:
        Integration.objects.filter(pk__in=missed).update(push_missed_at=now)


def _unrung(box: _Box) -> bool:
    """No ring since the mailbox's last read."""
    rung, read = box.integration.notified_at, box.integration.last_success_at
    return rung is None or (read is not None and rung <= read)
