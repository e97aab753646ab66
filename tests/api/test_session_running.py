"""What runs and what waits: GET /v1/sessions/{label}, its queue and its tree, while a turn
is on its way (the runner's stream events, published on the coordination port)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.queueing.coordination import InProcessCoordination
from nexus.settings import Settings
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
