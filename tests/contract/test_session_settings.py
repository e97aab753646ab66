"""A session's own queue settings and its archive state, as the router, the API's send and
the runner honour them (real SQLite and Postgres)."""

from __future__ import annotations

import pytest

from nexus.access.policy import parse_policies
from nexus.arrival.messages import send_to_session
from nexus.arrival.settings import QueuePolicy
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.enums import Disposition, QueueMode, SessionStatus
from nexus.ledger.repository import SessionArchived
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from tests.contract.engine_support import build_rig
from tests.support import FakeClock, route_one


def _runner(database: Database, clock: FakeClock) -> tuple[SessionRunner, RecordingDoorbell]:
    rig = build_rig(database, clock)
    doorbell = RecordingDoorbell()
    runner = SessionRunner(
        database=database,
        turns=rig.turns,
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
        routed = route_one(uow, event.id, policies, RecordingDoorbell())
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
        routed = route_one(uow, event.id, policies, RecordingDoorbell())
        uow.commit()
    assert routed.disposition == "denied" and "archived" in (routed.reason or "")
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get(event.id)
        items = uow.ledger.queue.for_session(session_id)
    assert stored is not None and stored.disposition == "denied"
    assert [i.event_id for i in items if i.event_id] != [] and len(items) == 1  # only "before"


CAPPED_DMS = """
- name: capped-dms
  match: {delivery: {peer_kind: dm}}
  session: {key: "dm:{principal.entity_id}", persona: atlas, queue_cap: 2, drop_policy: new}
"""


def test_a_message_sent_through_the_api_arrives_under_the_policy_that_keys_its_session(
    database: Database, clock: FakeClock
) -> None:
    """The policy's cap (2) holds for what the API sends to the session too, as
    `GET /v1/sessions/{label}` shows it: not the deployment's default of 20."""
    policies = parse_policies(CAPPED_DMS)
    event = _sms("sms:1", "+1")
    with database.unit_of_work() as uow:
        ingest(uow, [event], RecordingDoorbell())
        routed = route_one(uow, event.id, policies, RecordingDoorbell())
        uow.commit()
    for n in range(3):
        clock.advance(1)
        with database.unit_of_work() as uow:
            send_to_session(
                uow, routed.session_label or "", f"api {n}", RecordingDoorbell(),
                mode=QueueMode.QUEUE, queueing=QueuePolicy(), policies=policies,
            )  # fmt: skip
            uow.commit()
    with database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(routed.session_id or "")
    dropped = [i for i in items if i.disposition == Disposition.DROPPED]
    assert len(items) == 4 and len(dropped) == 2


def test_an_agents_post_and_a_hooks_firing_obey_the_cap_and_the_archive(
    database: Database, clock: FakeClock
) -> None:
    """Internal writers go through the one way in: an agent's posts past the session's cap
    are dropped like anyone's, and nothing is queued into an archived session (the event
    records why)."""
    from nexus.agents.posting import post

    session_id = _send(database, clock, "busy", "m0", QueueMode.QUEUE)
    with database.unit_of_work() as uow:
        uow.ledger.sessions.configure(session_id, {"queue_cap": 2, "drop_policy": "new"})
        for n in range(3):
            post(
                uow, RecordingDoorbell(), session_id=session_id, event_id=f"agent:p{n}",
                text=f"post {n}", payload={},
            )  # fmt: skip
        uow.commit()
    with database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(session_id)
        uow.ledger.sessions.configure(session_id, {"status": SessionStatus.ARCHIVED})
        uow.commit()
    assert len(items) == 4 and len([i for i in items if i.disposition == "dropped"]) == 2
    with database.unit_of_work() as uow:
        queued = post(
            uow, RecordingDoorbell(), session_id=session_id, event_id="agent:late",
            text="too late", payload={},
        )  # fmt: skip
        late = uow.ledger.events.get("agent:late")
        uow.commit()
    assert queued is False and late is not None
    assert late.disposition == "denied" and "archived" in (late.disposition_detail or "")
