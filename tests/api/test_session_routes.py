"""Sessions over HTTP: list, create, read by label or alias, send, read the thread, abort."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import QueueMode
from nexus.queueing.coordination import InProcessCoordination
from nexus.settings import Settings
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock

AUTH = {"Authorization": "Bearer tok"}


@pytest.fixture
def rig(database: Database, clock: FakeClock) -> Rig:
    return build_rig(database, clock)


@pytest.fixture
def coordination() -> InProcessCoordination:
    return InProcessCoordination()


@pytest.fixture
def doorbell() -> RecordingDoorbell:
    return RecordingDoorbell()


@pytest.fixture
def client(
    database: Database, rig: Rig, coordination: InProcessCoordination, doorbell: RecordingDoorbell
) -> TestClient:
    settings = Settings(api_tokens="tok")
    app = create_app(
        bootstrap(settings, database=database, doorbell=doorbell, coordination=coordination)
    )
    return TestClient(app)


ROUTES = [
    ("GET", "/v1/sessions"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions/main"),
    ("POST", "/v1/sessions/main/messages"),
    ("GET", "/v1/sessions/main/turns"),
    ("POST", "/v1/sessions/main/abort"),
    ("GET", "/v1/sessions/main/stream"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_session_route_wants_a_valid_token(
    client: TestClient, method: str, path: str
) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        answer = client.request(method, path, headers=headers)
        assert answer.status_code == 401, (method, path, answer.text)
        assert answer.json()["error"]["type"] == "unauthorized"


def test_create_list_and_read_sessions(client: TestClient, database: Database) -> None:
    made = client.post(
        "/v1/sessions", json={"label": "ops", "persona": "atlas", "queue_mode": "collect"},
        headers=AUTH,
    )  # fmt: skip
    assert made.status_code == 201, made.text
    assert made.json()["label"] == "ops" and made.json()["queue_mode"] == "collect"
    assert made.json()["persona"] == "atlas"
    again = client.post("/v1/sessions", json={"label": "ops"}, headers=AUTH)
    assert again.status_code == 409
    for label in ("b-1", "a-1", "c-1"):
        assert client.post("/v1/sessions", json={"label": label}, headers=AUTH).status_code == 201
    first = client.get("/v1/sessions?limit=2", headers=AUTH).json()
    rest = client.get(f"/v1/sessions?limit=2&cursor={first['next_cursor']}", headers=AUTH).json()
    assert [s["label"] for s in first["items"] + rest["items"]] == ["a-1", "b-1", "c-1", "ops"]
    assert rest["next_cursor"] is None
    with database.unit_of_work() as uow:
        uow.ledger.sessions.add_alias("dm:ent_new", "ops", reason="identity_merge")
        uow.commit()
    by_alias = client.get("/v1/sessions/dm:ent_new", headers=AUTH)
    assert by_alias.status_code == 200 and by_alias.json()["label"] == "ops"
    assert by_alias.json()["aliases"] == ["dm:ent_new"]
    assert client.get("/v1/sessions/nobody", headers=AUTH).status_code == 404
    unknown = client.get("/v1/sessions?persona=ghost", headers=AUTH)
    assert unknown.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"label": ""},
        {"label": "x\ny"},
        {"label": "ok", "queue_mode": "sometimes"},
        {"label": "ok", "colour": "red"},
    ],
)
def test_a_bad_session_body_is_422_with_a_message(client: TestClient, body: object) -> None:
    answer = client.post("/v1/sessions", json=body, headers=AUTH)
    assert answer.status_code == 422 and answer.json()["error"]["message"]


def test_a_message_is_queued_and_its_turn_read_back(
    client: TestClient, rig: Rig, doorbell: RecordingDoorbell, database: Database
) -> None:
    sent = client.post(
        "/v1/sessions/main/messages",
        json={"content": "hello there", "mode": "followup", "persona": "atlas"},
        headers=AUTH,
    )
    assert sent.status_code == 202, sent.text
    body = sent.json()
    assert body["session"] == "main" and body["mode"] == "followup"
    assert body["event_id"].startswith("api:") and body["queue_item_id"]
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve("main")
        assert session is not None
        [item] = uow.ledger.queue.for_session(session.id)
        event = uow.ledger.events.get(body["event_id"])
    assert doorbell.sessions == [session.id]  # rung after the commit
    assert item.id == body["queue_item_id"] and item.mode == QueueMode.FOLLOWUP
    assert event is not None and event.text == "hello there"
    assert client.get("/v1/sessions/main/turns", headers=AUTH).json()["turns"] == []
    for text in ("one", "two", "three"):
        rig.say(session.id, text)
    turns = client.get("/v1/sessions/main/turns", headers=AUTH).json()["turns"]
    assert [t["messages"][0]["content"]["text"] for t in turns] == ["one", "two", "three"]
    newest = client.get("/v1/sessions/main/turns?limit=1", headers=AUTH).json()["turns"]
    assert [t["turn"]["id"] for t in newest] == [turns[-1]["turn"]["id"]]


@pytest.mark.parametrize(
    "body",
    [{}, {"content": ""}, {"content": "hi", "mode": "later"}, {"content": "hi", "x": 1},
     {"content": "hi", "source": "martian"}],
)  # fmt: skip
def test_a_bad_message_is_422_and_queues_nothing(
    client: TestClient, body: object, database: Database
) -> None:
    answer = client.post("/v1/sessions/main/messages", json=body, headers=AUTH)
    assert answer.status_code == 422
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("main") is None


def test_abort_raises_the_flag_the_running_turn_checks(
    client: TestClient, coordination: InProcessCoordination, rig: Rig
) -> None:
    session = rig.session("busy")
    answer = client.post("/v1/sessions/busy/abort", headers=AUTH)
    assert answer.status_code == 202 and answer.json()["abort_requested"] is True
    # At the epoch it has now: a turn running now stops, one claimed later does not.
    assert coordination.abort_epoch(session.id) == session.epoch
    assert client.post("/v1/sessions/nobody/abort", headers=AUTH).status_code == 404
