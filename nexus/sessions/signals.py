"""A running turn's signals: the abort flag and the steer inbox as of its claim, the time limit."""

from __future__ import annotations

from nexus.engine.query import QueryMessage
from nexus.ids import Clock
from nexus.queueing.coordination import Coordination, Steer

# The turn asks about the shared abort flag after every streamed event; a model streams
# one every few milliseconds. Asking at most this often keeps an interrupt prompt (well
# under a second) without a Redis round trip per token. It is a rate, not an order: which
# signals a turn obeys is decided by epochs (`meant_for`), never by when it looks.
ABORT_POLL_MS = 50


def meant_for(claimed_at: int, raised_at: int) -> bool:
    """Whether a signal raised at epoch `raised_at` is for the turn claimed at `claimed_at`.

    Whoever raises a signal reads the session's epoch under its row lock, in the
    transaction that queued the input behind it; a claim bumps the epoch under the same
    lock. A signal raised at an epoch below the turn's was raised before its claim: its
    input was queued before the claim, so this turn (or the next) answers it from the
    queue, and it must not stop or steer this one. One raised at the turn's epoch, or
    later, came after the claim (a later epoch means a newer run fenced this one)."""
    return raised_at >= claimed_at


class RunSignals:
    """The engine's signals for one turn, claimed at `epoch`: the shared abort flag, the time
    limit, and the steer inbox minus what this turn already holds."""

    def __init__(
        self,
        coordination: Coordination,
        *,
        epoch: int,
        deadline_ms: int,
        clock: Clock,
        holding: set[str],
        claimed_at_ms: int | None = None,
    ) -> None:
        self._coordination = coordination
        self._epoch = epoch
        self._deadline = deadline_ms
        self._clock = clock
        self._holding = holding
        # A claim just now (`claimed_at_ms`) starts the first poll interval: the first look
        # waits it out like every later one, so a quick turn spends no round trip before its
        # first model call. That only delays when an abort raised meanwhile is seen (at the
        # next boundary; if none comes, the turn ends and its input is answered next from
        # the queue); what the look finds is judged by epoch, so it is never too early.
        self._next_poll_ms = None if claimed_at_ms is None else claimed_at_ms + ABORT_POLL_MS
        self._first_take_ms = self._next_poll_ms
        self._quiet_until_ms = self._next_poll_ms
        self.timed_out = False

    def abort_requested(self, session_id: str) -> bool:
        now = self._clock()
        if now >= self._deadline:
            self.timed_out = True
            return True
        if self._next_poll_ms is not None and now < self._next_poll_ms:
            return False
        self._next_poll_ms = now + ABORT_POLL_MS
        raised = self._coordination.abort_epoch(session_id)
        return raised is not None and meant_for(self._epoch, raised)

    def take_steering(self, session_id: str) -> list[QueryMessage]:
        if self._first_take_ms is not None:
            too_soon, self._first_take_ms = self._clock() < self._first_take_ms, None
            if too_soon:
                return []
        # Taking empties the inbox: steers raised before this claim go with it, unread.
        # Their inputs are queued, and answered from the queue by this turn or the next.
        return [s.message for s in self._coordination.take_steering(session_id) if self._mine(s)]

    def steer_waiting(self, session_id: str) -> bool:
        # Asked once a final answer is in. Within a poll interval of the claim it is not
        # asked, as the first take is not: an answer that quick leaves a steer that landed
        # meanwhile queued, for the next turn to answer, a round trip saved on every quick
        # turn (a model's answer takes longer than the interval).
        if self._quiet_until_ms is not None and self._clock() < self._quiet_until_ms:
            return False
        return any(
            s.message.extends_answer and self._mine(s)
            for s in self._coordination.steers_waiting(session_id)
        )

    def _mine(self, steer: Steer) -> bool:
        return (
            meant_for(self._epoch, steer.epoch) and steer.message.queue_item_id not in self._holding
        )
