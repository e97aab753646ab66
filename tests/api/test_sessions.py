"""POST /v1/sessions/{label}/compact: manual compaction over HTTP."""

from __future__ import annotations

from fastapi.testclient import TestClient

from nexus.adapters.scripted import ScriptedModel
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from nexus.settings import Settings
from tests.contract.engine_support import build_rig
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}


def test_compact_over_http_is_queued_and_the_session_runner_carries_it_out(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("dm:ent_api")
    for text in ("alpha", "beta"):
        rig.say(session.id, text)
    doorbell = RecordingDoorbell()
    coordination = InProcessCoordination()
    app = create_app(
        bootstrap(
            Settings(api_tokens="tok"),
            database=database,
            doorbell=doorbell,
            coordination=coordination,
        )
    )
    client = TestClient(app)
    answer = client.post(
        "/v1/sessions/dm:ent_api/compact", json={"instructions": "keep names"}, headers=AUTH
    )
    assert answer.status_code == 202, answer.text
    queued = answer.json()
    assert queued["status"] == "queued" and queued["session"] == "dm:ent_api"
    [announced] = coordination.read_stream(session.id, "0-0", block_ms=10)
    assert (announced.type, announced.data["queue_item_id"]) == (
        "queue.item.queued",
        queued["queue_item_id"],
    )
    # The API wrote no turn: it queued an item and rang the session.
    assert doorbell.sessions == [session.id]
    with database.unit_of_work() as uow:
        head_before = uow.ledger.sessions.get(session.id)
    runner = SessionRunner(
        database=database,
        turns=rig.turns,
        coordination=InProcessCoordination(),
        doorbell=doorbell,
        clock=clock,
    )
    assert runner.run(session.id).turns == 1
    with database.unit_of_work() as uow:
        item = uow.ledger.queue.get(queued["queue_item_id"])
        head = uow.ledger.sessions.get(session.id)
        assert item is not None and head is not None and head_before is not None
        view = uow.ledger.threads.get_turn(head.thread_id or "")
    assert item.disposition == "consumed" and item.consumed_by_turn_id == head.thread_id
    assert head.thread_id != head_before.thread_id
    assert view is not None and view.turn.turn_type == "compaction"
    assert isinstance(rig.model, ScriptedModel)
    assert "keep names" in rig.model.requests[-1].system_text
    # Asked again with nothing left in context: answered, without a turn.
    again = client.post("/v1/sessions/dm:ent_api/compact", headers=AUTH).json()
    runner.run(session.id)
    with database.unit_of_work() as uow:
        settled = uow.ledger.queue.get(again["queue_item_id"])
    assert settled is not None and settled.consumed_by_turn_id is None
    assert settled.disposition == "consumed" and "nothing to compact" in (
        settled.disposition_detail or ""
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
    app = create_app(
        bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    )
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
    app = create_app(
        bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    )
    client = TestClient(app)
    tree = client.get("/v1/sessions/dm:ent_tree/tree", headers=AUTH).json()
    assert [t["query"] for t in tree["turns"]] == ["one", "two"]
    assert tree["turns"][0]["branches"] == [
        {"kind": "fork", "session": "what-if", "task": None, "head": None}
    ]
    assert client.get("/v1/sessions/dm:nobody/tree", headers=AUTH).status_code == 404


def test_the_tree_shows_a_compaction_with_its_summary_first_line(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)  # the offline model, as in `nexus dev`
    session = rig.session("dm:ent_sum")
    rig.say(session.id, "the invoice is due Friday")
    compaction = rig.say(session.id, "/compact").compactions[0]
    app = create_app(
        bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    )
    tree = TestClient(app).get("/v1/sessions/dm:ent_sum/tree", headers=AUTH).json()
    normal, compacted = tree["turns"]
    assert (normal["type"], normal["summary"]) == ("normal", None)
    assert compacted["type"] == "compaction" and compacted["id"] == compaction.turn_id
    assert compacted["summary"] == (compaction.summary or "").splitlines()[0]
    assert "the invoice is due Friday" in compacted["summary"]


def test_nul_in_content_persona_or_label_is_a_clean_client_error(database: Database) -> None:
    # Postgres text cannot hold NUL: these were 500s (a ValueError from the driver).
    client = TestClient(
        create_app(
            bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
        )
    )
    sent = client.post("/v1/sessions/main/messages", json={"content": "a\x00b"}, headers=AUTH)
    assert sent.status_code == 422 and "NUL" in sent.json()["error"]["message"]
    persona = client.post("/v1/sessions", json={"label": "x", "persona": "p\x00"}, headers=AUTH)
    assert persona.status_code == 422 and "NUL" in persona.json()["error"]["message"]
    for path in ("/v1/sessions/a%00b", "/v1/sessions/a%00b/turns", "/v1/sessions/a%00b/queue"):
        assert client.get(path, headers=AUTH).status_code == 400, path
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("main") is None  # nothing half-written
