"""A running turn's signals: the abort flag asked at a bounded rate, the time limit, steering."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexus.engine.query import QueryMessage
from nexus.engine.stream import StreamEvent, StreamPublisher
from nexus.ids import Clock
from nexus.queueing.coordination import Coordination

# The turn asks about the shared abort flag after every streamed event; a model streams
# one every few milliseconds. Asking at most this often keeps an interrupt prompt (well
# under a second) without a Redis round trip per token.
ABORT_POLL_MS = 50


class RunSignals:
    """The engine's signals for one turn: the shared abort flag, the time limit, and the
    steer inbox minus what this turn already holds."""

    def __init__(
        self,
        coordination: Coordination,
        *,
        deadline_ms: int,
        clock: Clock,
        holding: set[str],
        cleared_at: int | None = None,
    ) -> None:
        self._coordination = coordination
        self._deadline = deadline_ms
        self._clock = clock
        self._holding = holding
        # The flag and the inbox were cleared at `cleared_at` (the turn's start): that counts
        # as a look at both, so the first ask waits out the interval like every later one,
        # not a round trip each before the first model call to find what was just cleared.
        # A steer that lands in between is taken at the next boundary, or by the one more
        # model call `steer_waiting` asks for at the end; its input is queued either way.
        self._next_poll_ms = None if cleared_at is None else cleared_at + ABORT_POLL_MS
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
        return self._coordination.abort_requested(session_id)

    def take_steering(self, session_id: str) -> list[QueryMessage]:
        if self._first_take_ms is not None:
            just_cleared, self._first_take_ms = self._clock() < self._first_take_ms, None
            if just_cleared:
                return []
        taken = self._coordination.take_steering(session_id)
        return [m for m in taken if m.queue_item_id not in self._holding]

    def steer_waiting(self, session_id: str) -> bool:
        # Asked once a final answer is in. Within a poll interval of the clear it is not
        # asked, as the first take is not: an answer that quick leaves a steer that landed
        # meanwhile queued, for the next turn to answer, a round trip saved on every quick
        # turn (a model's answer takes longer than the interval).
        if self._quiet_until_ms is not None and self._clock() < self._quiet_until_ms:
            return False
        return self._coordination.steer_waiting(session_id)


class ClearingPublisher:
    """A turn's publisher that clears its session's signals with the turn's first publish
    (`session.started` and the model call's `step.started`, a millisecond or two after the
    claim): one round trip, not one more before it. What raised a signal before the clear
    is answered from the queue, by this turn or the next. `settle` clears them if nothing
    was published yet (a turn that failed first, or a compaction)."""

    def __init__(self, coordination: Coordination, inner: StreamPublisher, session_id: str) -> None:
        self._coordination = coordination
        self._inner = inner
        self._session_id = session_id
        self._cleared = False

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.publish_many([StreamEvent(session_id, event_type, data)])

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        if self._cleared:
            self._inner.publish_many(events)
            return
        self._clear(events)
        self._coordination.settle()
        if self._inner is not self._coordination:
            self._inner.publish_many(events)

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        if self._cleared:
            self._inner.post_many(events)
            return
        self._clear(events)
        if self._inner is not self._coordination:
            self._inner.post_many(events)

    def _clear(self, events: Sequence[StreamEvent]) -> None:
        self._cleared = True
        # As deployed the stream is Redis too: the clear and the events, one round trip.
        together = self._inner is self._coordination
        self._coordination.clear_signals(self._session_id, then=events if together else ())

    def settle(self) -> None:
        if not self._cleared:
            self.publish_many(())
