"""POST /v1/sessions/{label}/compact: manual compaction over HTTP."""

from __future__ import annotations

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.db import Database
from nexus.engine.scripted import ScriptedModel
from nexus.ingest.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.contract.engine_support import build_rig
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}


def test_compact_over_http_passes_instructions_and_reports_the_turn(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_api")
    for text in ("alpha", "beta"):
        rig.say(session.id, text)
    app = create_app(Settings(api_tokens="tok"), database, RecordingDoorbell(), engine=rig.engine)
    client = TestClient(app)
    answer = client.post(
        "/v1/sessions/dm:ent_api/compact", json={"instructions": "keep names"}, headers=AUTH
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "committed" and body["turns_summarized"] == 2
    assert isinstance(rig.model, ScriptedModel)
    assert "keep names" in rig.model.requests[-1].system
    assert client.post("/v1/sessions/dm:ent_api/compact", headers=AUTH).json()["status"] == (
        "nothing"
    )
    missing = client.post("/v1/sessions/dm:nobody/compact", headers=AUTH)
    assert missing.status_code == 404 and "no session" in missing.json()["error"]["message"]
    assert client.post("/v1/sessions/dm:ent_api/compact").status_code == 401
    extra = client.post("/v1/sessions/dm:ent_api/compact", json={"nope": 1}, headers=AUTH)
    assert extra.status_code == 422


def test_the_queue_can_be_listed_and_a_waiting_item_cancelled(
    database: Database, clock: FakeClock
) -> None:
    from nexus.ledger.enums import QueueMode
    from nexus.ledger.records import NewQueueItem

    rig = build_rig(database, clock)
    session = rig.session("dm:ent_q")
    with database.unit_of_work() as uow:
        waiting, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, payload={"text": "a"})
        )
        clock.advance(1)
        busy, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, payload={"text": "b"})
        )
        uow.ledger.queue.claim_ids([busy], epoch=1, lease_ms=60_000)
        uow.commit()
    app = create_app(Settings(api_tokens="tok"), database, RecordingDoorbell(), engine=rig.engine)
    client = TestClient(app)
    listed = client.get("/v1/sessions/dm:ent_q/queue", headers=AUTH).json()
    assert [i["status"] for i in listed["items"]] == ["queued", "claimed"]
    cancelled = client.delete(f"/v1/sessions/dm:ent_q/queue/{waiting}", headers=AUTH)
    assert cancelled.status_code == 200
    assert (cancelled.json()["status"], cancelled.json()["disposition"]) == (
        "dropped",
        "cancelled",
    )
    assert client.delete(f"/v1/sessions/dm:ent_q/queue/{busy}", headers=AUTH).status_code == 409
    assert client.delete("/v1/sessions/dm:ent_q/queue/nope", headers=AUTH).status_code == 404
    still_open = client.get("/v1/sessions/dm:ent_q/queue?open_only=true", headers=AUTH).json()
    assert [i["id"] for i in still_open["items"]] == [busy]


def test_the_tree_endpoint_shows_turns_and_forks(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_tree")
    first = rig.say(session.id, "one").turn_id
    rig.say(session.id, "two")
    with database.unit_of_work() as uow:
        uow.ledger.sessions.fork(first, label="what-if")
        uow.commit()
    app = create_app(Settings(api_tokens="tok"), database, RecordingDoorbell(), engine=rig.engine)
    client = TestClient(app)
    tree = client.get("/v1/sessions/dm:ent_tree/tree", headers=AUTH).json()
    assert [t["query"] for t in tree["turns"]] == ["one", "two"]
    assert tree["turns"][0]["branches"] == [{"kind": "fork", "session": "what-if", "task": None}]
    assert client.get("/v1/sessions/dm:nobody/tree", headers=AUTH).status_code == 404


def test_nul_in_content_persona_or_label_is_a_clean_client_error(database: Database) -> None:
    # Postgres text cannot hold NUL: these were 500s (a ValueError from the driver).
    client = TestClient(create_app(Settings(api_tokens="tok"), database, RecordingDoorbell()))
    sent = client.post("/v1/sessions/main/messages", json={"content": "a\x00b"}, headers=AUTH)
    assert sent.status_code == 422 and "NUL" in sent.json()["error"]["message"]
    persona = client.post("/v1/sessions", json={"label": "x", "persona": "p\x00"}, headers=AUTH)
    assert persona.status_code == 422 and "NUL" in persona.json()["error"]["message"]
    for path in ("/v1/sessions/a%00b", "/v1/sessions/a%00b/turns", "/v1/sessions/a%00b/queue"):
        assert client.get(path, headers=AUTH).status_code == 404, path
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("main") is None  # nothing half-written
