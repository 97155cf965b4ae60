"""Named points in a run where a test can make the process die as `kill -9` would.

The crash-point matrix (tests/extraction/test_crash_matrix.py) and benchmarks/chaos.py start a real run in
its own process with EXTRACTION_CRASH_POINT="<name>[:<n>]"; at the n-th time (default 1) that the run
passes the point named, the process sends itself SIGKILL: no `finally`, no rollback handler, no atexit,
exactly as when an operator or the kernel kills a worker. Production refuses the setting (settings.py).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

from django.conf import settings

# Where a run can die, in the order a run passes them.
POINTS = (
    "fetch",  # a mailbox's delta has been read, nothing written
    "llm_call",  # Gemini has answered (its tokens are spent), the answer is not yet written
    "batch_tx",  # inside a batch's transaction: tasks and ledger rows inserted, not committed
    "after_batch",  # a batch is committed, the next not started
    "stop",  # the run has seen that its person asked it to stop, its end not yet recorded (in the commit: rolled back)
    "cursor_tx",  # inside the cursor commit: cursors compare-and-swapped, not committed
    "after_commit",  # the run's outcome and cursors are committed, the lease not yet released
)
# Where a chunk of morning digests can die (reminders/digest.py), once per person sent.
DIGEST_POINTS = (
    "digest_handed_over",  # the mail server said 250 to a person's digest, nothing written down yet
    "digest_journalled",  # that person's send is journalled in Redis, the chunk's days not yet recorded
)
# Where a chunk of reminders can die (reminders/ring.py), once per reminder rung.
REMINDER_POINTS = (
    "reminder_rung",  # the mail server (and push services) took a reminder, nothing written down yet
    "reminder_journalled",  # that ring is journalled in Redis, the chunk's reminders not yet recorded
)
# Where the inbound process (integrations/inbound/accept.py) can die, once per message taken.
INBOUND_POINTS = (
    "inbound_received",  # the whole message is received and checked, nothing stored, the sender not answered
    "inbound_stored_tx",  # inside the store's transaction: the row inserted, not committed
    "inbound_committed",  # the row is committed, the sender not yet told (no 250)
)

_hits: Counter[str] = Counter()
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """Die here if the process was told to (EXTRACTION_CRASH_POINT); otherwise do nothing."""
    wanted = settings.EXTRACTION_CRASH_POINT
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    with _lock:
        _hits[name] += 1
        reached = _hits[name] >= int(nth or 1)
    if reached:
        os.kill(os.getpid(), signal.SIGKILL)
