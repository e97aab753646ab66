"""What runs and what waits: GET /v1/sessions/{label}, its queue and its tree, while a turn
is on its way (the runner's stream events, published on the coordination port)."""

from __future__ import annotations

import dataclasses

from fastapi.testclient import TestClient

from nexus.adapters.scripted import Fail, Say
from nexus.api.app import create_app
from nexus.arrival.messages import send_to
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.model import ModelError, ModelRequest
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from nexus.settings import Settings
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock

TOKEN = "tok-running"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_a_running_turn_and_the_waiting_queue_are_shown_until_the_run_ends(
    database: Database, clock: FakeClock
) -> None:
    coordination = InProcessCoordination()
    graph = bootstrap(
        Settings(api_tokens=TOKEN),
        database=database,
        doorbell=RecordingDoorbell(),
        coordination=coordination,
    )
    client = TestClient(create_app(graph))
    for text in ("first", "second"):
        sent = client.post("/v1/sessions/busy/messages", json={"content": text}, headers=AUTH)
        assert sent.status_code == 202
        clock.advance(1_000)
    idle = client.get("/v1/sessions/busy", headers=AUTH).json()
    assert idle["running"] is None
    assert idle["pending"] == {"count": 2, "oldest_age_ms": 2_000}
    queue = client.get("/v1/sessions/busy/queue", headers=AUTH).json()["items"]
    assert [(i["position"], i["age_ms"]) for i in queue] == [(1, 2_000), (2, 1_000)]

    session_id = idle["id"]
    lease = coordination.acquire(f"session:{session_id}", 30_000)  # as a run holds it
    assert lease is not None
    started = {"inputs": 2, "turn_id": "01TURN", "worker": "w1:7", "started_at": clock.now}
    coordination.publish(session_id, "session.started", started)
    coordination.publish(session_id, "tool.started", {"id": "c1", "name": "lookup"})
    busy = client.get("/v1/sessions/busy", headers=AUTH).json()
    assert busy["running"] == {
        "turn_id": "01TURN",
        "worker": "w1:7",
        "started_at": clock.now,
        "step": "tool lookup",
    }
    tree = client.get("/v1/sessions/busy/tree", headers=AUTH).json()
    assert tree["running"]["turn_id"] == "01TURN" and tree["head"] is None

    coordination.publish(session_id, "session.completed", {"turn_id": "01TURN"})
    assert client.get("/v1/sessions/busy", headers=AUTH).json()["running"] is None
    assert client.get("/v1/sessions/busy/tree", headers=AUTH).json()["running"] is None
    lease.release()


def _watched(
    database: Database, clock: FakeClock, *, window: int | None = None
) -> tuple[TestClient, InProcessCoordination, Rig, list[str]]:
    """An API and a scripted engine that publish on one coordination store; `seen` gets
    the running step the API shows each time the commit phase begins (a commit hook)."""
    coordination = InProcessCoordination()
    graph = bootstrap(
        Settings(api_tokens=TOKEN),
        database=database,
        doorbell=RecordingDoorbell(),
        coordination=coordination,
    )
    client = TestClient(create_app(graph))
    seen: list[str] = []

    def look(*_: object) -> None:
        seen.append(_step(client))

    rig = build_rig(database, clock)
    rig.turns = dataclasses.replace(
        rig.turns, publisher=coordination, commit_hooks=(look,), context_window=window
    )
    return client, coordination, rig, seen


def _step(client: TestClient) -> str:
    running = client.get("/v1/sessions/phases", headers=AUTH).json()["running"]
    return "idle" if running is None else str(running["step"])


def _run(rig: Rig, coordination: InProcessCoordination, clock: FakeClock, text: str) -> None:
    with rig.database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve("phases")
        assert session is not None
        send_to(uow, session, text, RecordingDoorbell())
        uow.commit()
    runner = SessionRunner(
        database=rig.database,
        turns=rig.turns,
        coordination=coordination,
        doorbell=RecordingDoorbell(),
        clock=clock,
    )
    assert runner.run(session.id).turns >= 1


def test_compacting_on_overflow_and_completing_are_shown_while_they_happen(
    database: Database, clock: FakeClock
) -> None:
    client, coordination, rig, seen = _watched(database, clock)
    session = rig.session("phases")
    for number in range(4):
        rig.say(session.id, f"turn {number}")
    summarising: list[str] = []

    def summary(request: ModelRequest) -> Say:
        assert request.purpose == "summary"
        summarising.append(_step(client))
        return Say("a summary")

    overflow = ModelError("context_overflow", "prompt is too long")
    rig.model.push(Fail(overflow), summary, Say("answered after compaction"))
    seen.clear()  # the turns before ran with no lease held: nothing was running
    start = coordination.stream_tail(session.id)
    _run(rig, coordination, clock, "one more")
    assert summarising == ["compacting"]
    assert seen == ["completing"]
    assert _step(client) == "idle"
    events = [(e.type, e.data) for e in coordination.read_stream(session.id, start, block_ms=10)]
    types = [kind for kind, _ in events]
    compacting = [data for kind, data in events if kind == "context.compacting"]
    assert compacting == [{"trigger": "overflow", "turns": compacting[0]["turns"]}]
    assert compacting[0]["turns"] >= 1
    # In order: the failed call, the compaction (committed as a turn of its own), the
    # retried call, then the answer's commit phase and its commit.
    assert types.index("context.compacting") < types.index("turn.committed")
    assert types.index("turn.committed") < types.index("turn.completing")
    last_committed = len(types) - 1 - types[::-1].index("turn.committed")
    assert types.index("turn.completing") < last_committed
    [completing] = [data for kind, data in events if kind == "turn.completing"]
    assert completing["status"] == "completed"


def test_a_proactive_compaction_is_shown_as_compacting(
    database: Database, clock: FakeClock
) -> None:
    client, coordination, rig, seen = _watched(database, clock)
    session = rig.session("phases")
    for number in range(6):
        rig.say(session.id, f"question {number} " + "words " * 100)
    rig.turns = dataclasses.replace(rig.turns, context_window=1_000)
    summarising: list[str] = []

    def summary(request: ModelRequest) -> Say:
        summarising.append(_step(client))
        return Say("a summary")

    rig.model.push(summary, Say("answered"))
    seen.clear()
    start = coordination.stream_tail(session.id)
    _run(rig, coordination, clock, "and now?")
    assert summarising == ["compacting"]
    assert seen == ["completing"]
    events = coordination.read_stream(session.id, start, block_ms=10)
    assert [e.data["trigger"] for e in events if e.type == "context.compacting"] == ["proactive"]
