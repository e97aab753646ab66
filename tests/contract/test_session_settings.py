"""A session's own queue settings and its archive state, as the router, the API's send and
the runner honour them (real SQLite and Postgres)."""

from __future__ import annotations

import pytest

from nexus.access.policy import parse_policies
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.arrival import QueuePolicy
from nexus.ingest.direct import send_to_session
from nexus.ingest.router import process_event
from nexus.ingest.service import ingest
from nexus.ledger.enums import Disposition, QueueMode, SessionStatus
from nexus.ledger.repository import SessionArchived
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from tests.contract.engine_support import build_rig
from tests.support import FakeClock


def _runner(database: Database, clock: FakeClock) -> tuple[SessionRunner, RecordingDoorbell]:
    rig = build_rig(database, clock)
    doorbell = RecordingDoorbell()
    runner = SessionRunner(
        database=database,
        engine=rig.engine,
        coordination=InProcessCoordination(),
        doorbell=doorbell,
        clock=clock,
    )
    return runner, doorbell


def _sms(event_id: str, sender: str) -> NexusEvent:
    return NexusEvent(
        id=event_id,
        adapter="sms",
        platform="sms",
        sender=Author(id=sender),
        container=Container(kind="dm", id=sender),
        text="hi",
        occurred_at=0,
    )


def _send(database: Database, clock: FakeClock, label: str, text: str, mode: QueueMode) -> str:
    clock.advance(1)
    with database.unit_of_work() as uow:
        queued = send_to_session(
            uow, label, text, RecordingDoorbell(), mode=mode, queueing=QueuePolicy()
        )
        uow.commit()
    return queued.session.id


def test_a_sessions_own_debounce_holds_a_collect_batch_that_long(
    database: Database, clock: FakeClock
) -> None:
    runner, doorbell = _runner(database, clock)
    session_id = _send(database, clock, "slow", "c0", QueueMode.COLLECT)
    with database.unit_of_work() as uow:
        uow.ledger.sessions.configure(session_id, {"debounce_ms": 5_000})
        uow.commit()
    _send(database, clock, "slow", "c1", QueueMode.COLLECT)
    assert runner.run(session_id).status == "waiting"
    assert 1_000 < doorbell.later[-1][1] <= 5_000  # not the deployment's 1 s
    clock.advance(2_000)
    assert runner.run(session_id).status == "waiting"
    clock.advance(3_000)
    assert runner.run(session_id).turns == 1


def test_a_sessions_own_cap_and_drop_policy_apply_to_what_arrives(
    database: Database, clock: FakeClock
) -> None:
    session_id = _send(database, clock, "capped", "m0", QueueMode.QUEUE)
    with database.unit_of_work() as uow:
        uow.ledger.sessions.configure(session_id, {"queue_cap": 2, "drop_policy": "new"})
        uow.commit()
    for n in range(1, 4):
        _send(database, clock, "capped", f"m{n}", QueueMode.QUEUE)
    with database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(session_id)
    dropped = [i for i in items if i.disposition == Disposition.DROPPED]
    assert len(items) == 4 and len(dropped) == 2  # the cap of 2, the newest dropped


def test_a_policy_sets_the_queue_of_the_sessions_it_keys(
    database: Database, clock: FakeClock
) -> None:
    policies = parse_policies(
        """
        - name: patient-dms
          match: {delivery: {peer_kind: dm}}
          session: {key: "dm:{principal.entity_id}", persona: atlas,
                    queue_mode: collect, debounce_ms: 30000}
        """
    )
    event = _sms("sms:1", "+1")
    with database.unit_of_work() as uow:
        ingest(uow, [event], RecordingDoorbell())
        routed = process_event(uow, event.id, policies, RecordingDoorbell())
        [item] = uow.ledger.queue.for_session(routed.session_id or "")
        uow.commit()
    assert (item.mode, item.payload) == (QueueMode.COLLECT, {"debounce_ms": 30_000})


def test_an_archived_session_refuses_new_work_and_stays_readable(
    database: Database, clock: FakeClock
) -> None:
    session_id = _send(database, clock, "dm:ent_gone", "before", QueueMode.QUEUE)
    with database.unit_of_work() as uow:
        uow.ledger.sessions.configure(session_id, {"status": SessionStatus.ARCHIVED})
        uow.commit()
    with pytest.raises(SessionArchived, match="archived"):
        _send(database, clock, "dm:ent_gone", "after", QueueMode.QUEUE)
    policies = parse_policies(
        """
        - name: to-the-archived
          match: {delivery: {peer_kind: dm}}
          session: {key: "dm:ent_gone", persona: atlas}
        """
    )
    event = _sms("sms:2", "+2")
    with database.unit_of_work() as uow:
        ingest(uow, [event], RecordingDoorbell())
        routed = process_event(uow, event.id, policies, RecordingDoorbell())
        uow.commit()
    assert routed.disposition == "denied" and "archived" in (routed.reason or "")
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get(event.id)
        items = uow.ledger.queue.for_session(session_id)
    assert stored is not None and stored.disposition == "denied"
    assert [i.event_id for i in items if i.event_id] != [] and len(items) == 1  # only "before"
