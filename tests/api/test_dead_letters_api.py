"""GET /v1/dead-letters a cursor page at a time, one by id, and the replay route's answers."""

from __future__ import annotations

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus
from nexus.ledger.records import NewQueueItem
from nexus.settings import Settings
from tests.support import FakeClock, new_session

AUTH = {"Authorization": "Bearer tok"}


def _dead_letters(database: Database, clock: FakeClock, count: int) -> list[str]:
    ids = []
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger, "support")
        for number in range(count):
            item_id, _ = uow.ledger.queue.enqueue(
                NewQueueItem(
                    session_id=session.id, mode=QueueMode.QUEUE, payload={"text": f"#{number}"}
                )
            )
            clock.advance(1)
            uow.ledger.queue.dispose(
                [item_id],
                status=QueueStatus.DEAD,
                disposition=Disposition.DEAD_LETTERED,
                detail="after 3 attempts: boom",
            )
            ids.append(item_id)
        uow.commit()
    return ids


def test_dead_letters_page_by_cursor_and_replay_answers(
    database: Database, clock: FakeClock
) -> None:
    first, second, third = _dead_letters(database, clock, 3)
    doorbell = RecordingDoorbell()
    graph = bootstrap(Settings(api_tokens="tok"), database=database, doorbell=doorbell)
    client = TestClient(create_app(graph))
    page = client.get("/v1/dead-letters", params={"limit": 2}, headers=AUTH).json()
    assert [d["id"] for d in page["items"]] == [third, second]
    rest = client.get(
        "/v1/dead-letters", params={"limit": 2, "cursor": page["next_cursor"]}, headers=AUTH
    ).json()
    assert [d["id"] for d in rest["items"]] == [first] and rest["next_cursor"] is None
    bad = client.get("/v1/dead-letters", params={"cursor": "nope"}, headers=AUTH)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_cursor"
    assert client.get("/v1/dead-letters").status_code == 401

    shown = client.get(f"/v1/dead-letters/{first}", headers=AUTH).json()
    assert (shown["session"], shown["text"], shown["replayed_as"]) == ("support", "#0", None)
    replayed = client.post(f"/v1/dead-letters/{first}/replay", headers=AUTH)
    assert replayed.status_code == 200 and replayed.json()["created"] is True
    again = client.post(f"/v1/dead-letters/{first}/replay", headers=AUTH).json()
    assert again["queue_item_id"] == replayed.json()["queue_item_id"] and not again["created"]
    assert len(doorbell.sessions) == 1  # rung once, for the one new item
    missing = client.post("/v1/dead-letters/01NOPE/replay", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
    assert client.get("/v1/dead-letters/01NOPE", headers=AUTH).status_code == 404
