"""A turn obeys only the signals raised after its claim, whatever the timing: an interrupt
or steer raised before it claimed its inputs never stops or steers it, however long its
setup takes (a cold model port, a slow context read), and one raised while it runs still
does. On the coordination's in-process twin and on Redis, through the API's own path."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from nexus.adapters.scripted import CallTools, Say
from nexus.arrival.messages import send_to_session
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.model import ModelPort
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus, TurnStatus
from nexus.queueing.coordination import Coordination
from nexus.sessions.runner import SessionRunner
from nexus.sessions.signals import ABORT_POLL_MS
from tests.contract.engine_support import RecordingTool, Rig, build_rig
from tests.support import FakeClock

LABEL = "dm:ent_test"


def _send(rig: Rig, coordination: Coordination, text: str, mode: QueueMode) -> str:
    """What `POST /v1/sessions/{label}/messages` does: queue, then signal after commit."""
    with rig.database.unit_of_work() as uow:
        queued = send_to_session(
            uow, LABEL, text, RecordingDoorbell(), mode=mode, arrivals=coordination
        )
        uow.commit()
    return queued.queue_item_id


def _runner(rig: Rig, coordination: Coordination, clock: Callable[[], int]) -> SessionRunner:
    return SessionRunner(
        database=rig.database,
        turns=rig.turns,
        coordination=coordination,
        doorbell=RecordingDoorbell(),
        clock=clock,
    )


def _slow_first_use(rig: Rig, delay: Callable[[], None]) -> list[int]:
    """The model port's first use takes a while (a cold process imports the SDK then)."""
    build, used = rig.turns.model_for, list[int]()

    def model_for(name: str) -> ModelPort:
        if not used:
            delay()
        used.append(1)
        return build(name)

    rig.turns.model_for = model_for
    return used


def _statuses(rig: Rig, session_id: str) -> list[TurnStatus]:
    with rig.database.reading() as uow:
        session = uow.ledger.sessions.get(session_id)
        assert session is not None and session.thread_id is not None
        return [view.turn.status for view in uow.ledger.threads.read_ancestry(session.thread_id)]


@pytest.mark.parametrize("mode", [QueueMode.INTERRUPT, QueueMode.STEER])
def test_a_signal_raised_before_the_claim_never_reaches_the_turn_however_slow_its_setup(
    database: Database, clock: FakeClock, coordination: Coordination, mode: QueueMode
) -> None:
    """The first message to a fresh session, in interrupt (or steer) mode, raised its
    signal after its commit; the turn that claims it spends seconds before its first model
    call. It answers the message, once, and is not aborted by its own arrival."""
    rig = build_rig(database, clock)
    session = rig.session(LABEL)
    _send(rig, coordination, "hi, first one", mode)
    _slow_first_use(rig, lambda: clock.advance(5_000))
    rig.model.push(Say("hello"))
    report = _runner(rig, coordination, clock).run(session.id)
    assert report.turns == 1
    assert _statuses(rig, session.id) == [TurnStatus.COMPLETED]
    assert len(rig.model.requests) == 1
    texts = [m["content"] for m in rig.model.requests[0].messages if m["role"] == "user"]
    assert sum("hi, first one" in str(t) for t in texts) == 1  # not steered in twice


@pytest.mark.slow
def test_a_cold_setup_of_several_real_seconds_does_not_abort_the_first_turn(
    database: Database, clock: FakeClock, coordination: Coordination
) -> None:
    """The same, on the wall clock: three real seconds before the first model call."""
    rig = build_rig(database, clock)
    session = rig.session(LABEL)
    _send(rig, coordination, "hi, first one", QueueMode.INTERRUPT)
    _slow_first_use(rig, lambda: time.sleep(3))
    rig.model.push(Say("hello"))
    assert _runner(rig, coordination, lambda: int(time.time() * 1000)).run(session.id).turns == 1
    assert _statuses(rig, session.id) == [TurnStatus.COMPLETED]


def test_an_interrupt_raised_while_the_turn_runs_stops_it_and_is_answered_next(
    database: Database, clock: FakeClock, coordination: Coordination
) -> None:
    rig = build_rig(database, clock)
    session = rig.session(LABEL)
    _send(rig, coordination, "tell me a long story", QueueMode.INTERRUPT)
    _slow_first_use(rig, lambda: clock.advance(5_000))  # the stale flag from its own arrival
    late: list[str] = []

    def interrupted(request: object) -> Say:
        late.append(_send(rig, coordination, "never mind", QueueMode.INTERRUPT))
        clock.advance(ABORT_POLL_MS)  # the turn looks at its signals again after this
        return Say("Once upon a time there was")

    rig.model.push(interrupted, Say("ok, never mind"))
    assert _runner(rig, coordination, clock).run(session.id).turns == 2
    assert _statuses(rig, session.id) == [TurnStatus.ABORTED, TurnStatus.COMPLETED]
    with rig.database.reading() as uow:
        (item,) = [i for i in uow.ledger.queue.for_session(session.id) if i.id == late[0]]
    assert (item.status, item.disposition) == (QueueStatus.DONE, Disposition.CONSUMED)


def test_a_steer_raised_while_the_turn_runs_joins_it(
    database: Database, clock: FakeClock, coordination: Coordination
) -> None:
    probe = RecordingTool("probe")
    rig = build_rig(database, clock, tools=[probe], granted=["probe"])
    session = rig.session(LABEL, capabilities=["test_tools"])
    _send(rig, coordination, "draft the email", QueueMode.STEER)  # its own steer: stale
    steered: list[str] = []

    def steer() -> None:
        steered.append(_send(rig, coordination, "make it shorter", QueueMode.STEER))
        clock.advance(ABORT_POLL_MS)

    probe.on_call = steer
    rig.model.push(CallTools((("probe", {}),)), Say("Short email."))
    assert _runner(rig, coordination, clock).run(session.id).turns == 1
    assert _statuses(rig, session.id) == [TurnStatus.COMPLETED]
    with rig.database.reading() as uow:
        (item,) = [i for i in uow.ledger.queue.for_session(session.id) if i.id == steered[0]]
    assert (item.status, item.disposition) == (QueueStatus.DONE, Disposition.INJECTED)
    last = rig.model.requests[-1].messages
    assert sum("draft the email" in str(m["content"]) for m in last) == 1
