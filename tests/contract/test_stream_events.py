"""The session stream carries every event the docs promise — queue.item.*, message.created,
step.generating among them — read back from the in-process twin and from real Redis."""

from __future__ import annotations

import uuid
from typing import Any

from nexus.adapters.scripted import Fail, Say
from nexus.arrival.service import queue_for
from nexus.arrival.settings import Arrival, QueuePolicy
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.model import ModelError
from nexus.ledger.enums import QueueMode
from nexus.ledger.records import EventDraft, SessionRecord
from nexus.queueing.coordination import Coordination
from nexus.queueing.settings import QueueOverrides, effective_queue
from nexus.queueing.stream_log import START, StreamEntry
from nexus.sessions.runner import SessionRunner
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock


def _queue(
    rig: Rig,
    session: SessionRecord,
    coordination: Coordination,
    text: str,
    *,
    queueing: QueuePolicy | None = None,
) -> str:
    """What the router and POST …/messages do: one event, queued, committed."""
    with rig.database.unit_of_work() as uow:
        event_id = f"api:{uuid.uuid4().hex}"
        uow.ledger.events.insert(
            EventDraft(id=event_id, adapter="api", platform="api", text=text, occurred_at=1)
        )
        event = uow.ledger.events.get(event_id)
        assert event is not None
        defaults = (queueing or QueuePolicy()).defaults
        settings = effective_queue(QueueOverrides(), QueueOverrides(), defaults)
        came = Arrival(event, QueueMode.QUEUE, settings)
        queued = queue_for(uow, session, [came], signals=coordination, doorbell=RecordingDoorbell())
        uow.commit()
    return queued.item_ids[0]


def _read(coordination: Coordination, session_id: str) -> list[StreamEntry]:
    return coordination.read_stream(session_id, START, block_ms=10)


def _runner(rig: Rig, coordination: Coordination, clock: FakeClock, **kw: Any) -> SessionRunner:
    return SessionRunner(
        database=rig.database,
        turns=rig.turns,
        coordination=coordination,
        doorbell=RecordingDoorbell(),
        clock=clock,
        **kw,
    )


def test_a_queued_message_and_its_turn_publish_every_promised_event(
    database: Database, clock: FakeClock, coordination: Coordination
) -> None:
    rig = build_rig(database, clock)
    rig.turns.publisher = coordination  # as bootstrap wires it
    session = rig.session("dm:ent_stream")
    item_id = _queue(rig, session, coordination, "hello there")
    rig.model.push(Say("hi, how can I help"))
    assert _runner(rig, coordination, clock).run(session.id).turns == 1
    entries = _read(coordination, session.id)
    names = [entry.type for entry in entries]
    # Each promised event, in the order things happened.
    promised = [
        "queue.item.queued",
        "session.started",
        "step.started",
        "step.generating",
        "message.delta",
        "step.generated",
        "message.created",
        "queue.item.consumed",
        "turn.committed",
        "session.completed",
    ]
    assert [name for name in names if name in promised] == sorted(
        (name for name in names if name in promised), key=promised.index
    )
    assert set(promised) <= set(names)
    by_type: dict[str, list[StreamEntry]] = {}
    for entry in entries:
        by_type.setdefault(entry.type, []).append(entry)
    assert by_type["queue.item.queued"][0].data["queue_item_id"] == item_id
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
        assert head is not None and head.thread_id is not None
        turn = uow.ledger.threads.get_turn(head.thread_id)
    assert turn is not None
    created = [entry.data for entry in by_type["message.created"]]
    assert [(c["message_id"], c["role"]) for c in created] == [
        (m.id, m.role.value) for m in turn.messages
    ]
    assert {c["turn_id"] for c in created} == {turn.turn.id}
    [consumed] = by_type["queue.item.consumed"]
    assert consumed.data == {
        "queue_item_id": item_id,
        "turn_id": turn.turn.id,
        "disposition": "consumed",
    }
    assert by_type["step.generating"][0].data["call"] == 1


def test_drops_and_dead_letters_are_on_the_stream(
    database: Database, clock: FakeClock, coordination: Coordination
) -> None:
    rig = build_rig(database, clock)
    rig.turns.publisher = coordination
    session = rig.session("dm:ent_drops")
    capped = QueuePolicy(cap=1, drop="old")
    first = _queue(rig, session, coordination, "first", queueing=capped)
    second = _queue(rig, session, coordination, "second", queueing=capped)
    dropped = [e.data for e in _read(coordination, session.id) if e.type == "queue.item.dropped"]
    assert [(d["queue_item_id"], d["disposition"]) for d in dropped] == [(first, "dropped")]
    assert "queue cap 1" in dropped[0]["reason"]
    rig.model.push(Fail(ModelError("auth_failure", "bad key")))
    _runner(rig, coordination, clock, max_attempts=1).run(session.id)
    dead = [e.data for e in _read(coordination, session.id) if e.type == "queue.item.dead"]
    assert [d["queue_item_id"] for d in dead] == [second]
    assert "auth_failure" in dead[0]["reason"]
