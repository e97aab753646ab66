"""A running turn asks the shared abort flag at most every ABORT_POLL_MS, and its own time
limit every time."""

from __future__ import annotations

from nexus.engine.query import QueryMessage
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.signals import ABORT_POLL_MS, RunSignals
from tests.support import FakeClock


class CountingCoordination(InProcessCoordination):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def abort_requested(self, session_id: str) -> bool:
        self.asked += 1
        return super().abort_requested(session_id)


def _deadline(clock: FakeClock, coordination: CountingCoordination) -> RunSignals:
    return RunSignals(coordination, deadline_ms=clock.now + 10_000, clock=clock, holding=set())


def _cleared_now(clock: FakeClock, coordination: CountingCoordination) -> RunSignals:
    """A turn's signals right after the turn cleared them."""
    return RunSignals(
        coordination,
        deadline_ms=clock.now + 10_000,
        clock=clock,
        holding=set(),
        cleared_at=clock.now,
    )


def test_the_flag_is_asked_once_per_poll_interval() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _deadline(clock, coordination)
    assert not any(signals.abort_requested("s") for _ in range(100))
    assert coordination.asked == 1
    clock.advance(ABORT_POLL_MS)
    coordination.request_abort("s")
    assert signals.abort_requested("s")
    assert coordination.asked == 2


def test_an_abort_is_seen_within_one_poll_interval() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _deadline(clock, coordination)
    assert not signals.abort_requested("s")
    coordination.request_abort("s")
    seen_after = 0
    while not signals.abort_requested("s"):
        clock.advance(1)
        seen_after += 1
    assert seen_after <= ABORT_POLL_MS


def test_the_time_limit_is_checked_on_every_call() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _deadline(clock, coordination)
    assert not signals.abort_requested("s")
    clock.advance(10_000)
    assert signals.abort_requested("s") and signals.timed_out


def test_a_turn_that_just_cleared_the_flag_asks_it_first_a_poll_interval_later() -> None:
    """Clearing the signals at the turn's start counts as a poll: no round trip before the
    first model call to find the flag just cleared, and an abort raised after the clear is
    still seen within one interval."""
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _cleared_now(clock, coordination)
    assert not signals.abort_requested("s")
    assert coordination.asked == 0
    coordination.request_abort("s")
    clock.advance(ABORT_POLL_MS)
    assert signals.abort_requested("s")
    assert coordination.asked == 1


class CountingSteer(CountingCoordination):
    def __init__(self) -> None:
        super().__init__()
        self.taken = 0
        self.looked = 0

    def take_steering(self, session_id: str) -> list[QueryMessage]:
        self.taken += 1
        return super().take_steering(session_id)

    def steer_waiting(self, session_id: str) -> bool:
        self.looked += 1
        return super().steer_waiting(session_id)


def test_the_first_model_call_right_after_the_clear_does_not_ask_for_steering() -> None:
    """The inbox was just emptied: the first boundary takes nothing without a round trip;
    a steer waiting at a later boundary is taken there."""
    clock, coordination = FakeClock(), CountingSteer()
    signals = _cleared_now(clock, coordination)
    assert signals.take_steering("s") == []
    assert coordination.taken == 0
    coordination.steer("s", QueryMessage(text="also this"))
    clock.advance(ABORT_POLL_MS)
    assert [m.text for m in signals.take_steering("s")] == ["also this"]
    assert coordination.taken == 1


def test_an_answer_within_a_poll_interval_of_the_clear_does_not_ask_for_a_steer() -> None:
    """A turn whose answer is in before a poll interval has passed asks nothing (its steer,
    if one landed, stays queued for the next turn); a later answer asks, and finds it."""
    clock, coordination = FakeClock(), CountingSteer()
    signals = _cleared_now(clock, coordination)
    coordination.steer("s", QueryMessage(text="and this", extends_answer=True))
    clock.advance(ABORT_POLL_MS - 1)
    assert signals.steer_waiting("s") is False
    assert coordination.looked == 0
    clock.advance(1)
    assert signals.steer_waiting("s") is True
    assert coordination.looked == 1
