"""A running turn obeys the signals raised at its claim's epoch or later, never one raised
before its claim, however late it looks; it asks the shared abort flag at most every
ABORT_POLL_MS, and its own time limit every time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nexus.engine.query import QueryMessage
from nexus.queueing.coordination import InProcessCoordination, Steer
from nexus.sessions.signals import ABORT_POLL_MS, RunSignals, meant_for
from tests.support import FakeClock

EPOCH = 7  # the turn's claim


class CountingCoordination(InProcessCoordination):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0
        self.taken = 0
        self.looked = 0

    def abort_epoch(self, session_id: str) -> int | None:
        self.asked += 1
        return super().abort_epoch(session_id)

    def take_steering(self, session_id: str) -> list[Steer]:
        self.taken += 1
        return super().take_steering(session_id)

    def steers_waiting(self, session_id: str) -> list[Steer]:
        self.looked += 1
        return super().steers_waiting(session_id)


def _signals(
    clock: FakeClock, coordination: CountingCoordination, *, just_claimed: bool = False
) -> RunSignals:
    return RunSignals(
        coordination,
        epoch=EPOCH,
        deadline_ms=clock.now + 10_000,
        clock=clock,
        holding={"q-held"},
        claimed_at_ms=clock.now if just_claimed else None,
    )


@given(claimed=st.integers(0, 10**9), raised=st.integers(0, 10**9))
def test_a_signal_is_meant_for_a_turn_only_when_raised_at_its_epoch_or_later(
    claimed: int, raised: int
) -> None:
    assert meant_for(claimed, raised) is (raised >= claimed)


def test_an_abort_raised_before_the_claim_never_stops_the_turn_however_late_it_looks() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    coordination.request_abort("s", epoch=EPOCH - 1)  # its own arrival's, before the claim
    signals = _signals(clock, coordination, just_claimed=True)
    for _ in range(5):
        clock.advance(1_900)  # a cold SDK import, a slow context read (within its time limit)
        assert signals.abort_requested("s") is False
    assert coordination.asked == 5


def test_an_abort_raised_at_the_turns_epoch_stops_it() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination)
    assert not signals.abort_requested("s")
    coordination.request_abort("s", epoch=EPOCH)
    clock.advance(ABORT_POLL_MS)
    assert signals.abort_requested("s")


def test_a_lower_ask_after_a_higher_one_keeps_the_higher() -> None:
    coordination = InProcessCoordination()
    coordination.request_abort("s", epoch=EPOCH)
    coordination.request_abort("s", epoch=EPOCH - 3)
    assert coordination.abort_epoch("s") == EPOCH


def test_the_flag_is_asked_once_per_poll_interval() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination)
    assert not any(signals.abort_requested("s") for _ in range(100))
    assert coordination.asked == 1
    clock.advance(ABORT_POLL_MS)
    coordination.request_abort("s", epoch=EPOCH)
    assert signals.abort_requested("s")
    assert coordination.asked == 2


def test_an_abort_is_seen_within_one_poll_interval() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination)
    assert not signals.abort_requested("s")
    coordination.request_abort("s", epoch=EPOCH)
    seen_after = 0
    while not signals.abort_requested("s"):
        clock.advance(1)
        seen_after += 1
    assert seen_after <= ABORT_POLL_MS


def test_the_time_limit_is_checked_on_every_call() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination)
    assert not signals.abort_requested("s")
    clock.advance(10_000)
    assert signals.abort_requested("s") and signals.timed_out


def test_a_turn_just_claimed_looks_first_a_poll_interval_later() -> None:
    """The claim starts the first interval: no round trip before a quick first model call.
    An abort raised after the claim is still seen within one interval."""
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination, just_claimed=True)
    assert not signals.abort_requested("s")
    assert coordination.asked == 0
    coordination.request_abort("s", epoch=EPOCH)
    clock.advance(ABORT_POLL_MS)
    assert signals.abort_requested("s")
    assert coordination.asked == 1


def test_steers_raised_before_the_claim_or_for_held_items_are_not_taken() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination)
    coordination.steer("s", QueryMessage(text="stale", queue_item_id="q0"), epoch=EPOCH - 1)
    coordination.steer("s", QueryMessage(text="held", queue_item_id="q-held"), epoch=EPOCH)
    coordination.steer("s", QueryMessage(text="new", queue_item_id="q1"), epoch=EPOCH)
    assert [m.text for m in signals.take_steering("s")] == ["new"]
    assert coordination.take_steering("s") == []  # the stale ones went too: queued anyway


def test_the_first_model_call_right_after_the_claim_does_not_ask_for_steering() -> None:
    """The first boundary within an interval of the claim takes nothing, without a round
    trip; a steer waiting at a later boundary is taken there."""
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination, just_claimed=True)
    assert signals.take_steering("s") == []
    assert coordination.taken == 0
    coordination.steer("s", QueryMessage(text="also this"), epoch=EPOCH)
    clock.advance(ABORT_POLL_MS)
    assert [m.text for m in signals.take_steering("s")] == ["also this"]
    assert coordination.taken == 1


def test_a_steer_waiting_counts_only_when_raised_after_the_claim() -> None:
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination)
    stale = QueryMessage(text="and this", queue_item_id="q0", extends_answer=True)
    coordination.steer("s", stale, epoch=EPOCH - 1)
    assert signals.steer_waiting("s") is False
    coordination.steer("s", QueryMessage(text="and this", extends_answer=True), epoch=EPOCH)
    assert signals.steer_waiting("s") is True


def test_an_answer_within_a_poll_interval_of_the_claim_does_not_ask_for_a_steer() -> None:
    """A turn whose answer is in before a poll interval has passed asks nothing (its steer,
    if one landed, stays queued for the next turn); a later answer asks, and finds it."""
    clock, coordination = FakeClock(), CountingCoordination()
    signals = _signals(clock, coordination, just_claimed=True)
    coordination.steer("s", QueryMessage(text="and this", extends_answer=True), epoch=EPOCH)
    clock.advance(ABORT_POLL_MS - 1)
    assert signals.steer_waiting("s") is False
    assert coordination.looked == 0
    clock.advance(1)
    assert signals.steer_waiting("s") is True
    assert coordination.looked == 1
