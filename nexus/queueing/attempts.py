"""What counts as one of a queue item's attempts, when it is out of them, and the wait
before the next one (pure; docs/runtime.md, "Attempts and takeovers").

A claim counts the attempt as it is made (`queue_items.attempts + 1`): a run that dies
cannot count anything afterwards, so the count has to be in before the turn starts. How the
run ended then settles whether that count stands. Every end counts but one: a run that comes
back and finds itself fenced (its commit refused because another run claimed the session
at a newer epoch) was alive all along. Its lease lapsed (a keep-alive thread starved of CPU,
a paused process, Redis lost) and another run took over; the message did not fail it, so the
fenced run gives its attempt back. A run that never comes back (killed, its host lost) keeps
its count, so a message that kills every worker it reaches is still dead-lettered.
"""

from __future__ import annotations

from nexus.ledger.enums import QueueStatus

DEFAULT_MAX_ATTEMPTS = 3
RETRY_BACKOFF_MS = (1_000, 5_000, 30_000)


def gives_back(
    *, fenced_epoch: int, status: QueueStatus, claimed_epoch: int | None, attempts: int
) -> bool:
    """Whether a run fenced at `fenced_epoch` gives back, on one of the items it claimed,
    the attempt its claim counted, the item being now as the other arguments say.

    Yes while the item's latest claim is this run's or a later one (it is still held, back
    in the queue, or taken over: answered or still running), whatever became of it since,
    but a dead letter: it keeps the count it died with. Never below nothing.
    `QueueRecovery.hand_back_fenced` is this rule in SQL."""
    return (
        claimed_epoch is not None
        and claimed_epoch >= fenced_epoch
        and status != QueueStatus.DEAD
        and attempts > 0
    )


def out_of_attempts(attempts: int, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> bool:
    """Whether an item whose claims counted `attempts` gets no further one: dead-lettered."""
    return attempts >= max_attempts


def retry_delay_ms(attempts: int) -> int:
    """The wait before an item that failed after `attempts` counted attempts is due again:
    1 s, 5 s, then 30 s for every later one."""
    return RETRY_BACKOFF_MS[min(max(attempts, 1), len(RETRY_BACKOFF_MS)) - 1]
