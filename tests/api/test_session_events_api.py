"""GET /v1/sessions/{label}/events: a session's kept stream events in sequence order, page by
page (`items`, `next_cursor`), after a sequence, a kept event's id or an SSE event id; a bad
`after` is a readable 400 that changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.support import new_session

AUTH = {"Authorization": "Bearer tok"}
URL = "/v1/sessions/dm:kept/events"


@pytest.fixture
def client(database: Database) -> TestClient:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger, "dm:kept")
        new_session(uow.ledger, "dm:other")
        events = uow.ledger.session_events
        events.append(session.id, "TURNA", [("session.started", {"n": 1}), ("x", {"n": 2})])
        events.append(
            session.id, "TURNB", [("session.started", {"n": 3}), ("y", {"n": 4}), ("z", {})]
        )
        uow.commit()
    graph = bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    return TestClient(create_app(graph))


def _get(client: TestClient, **params: Any) -> dict[str, Any]:
    answer = client.get(URL, params=params, headers=AUTH)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _sequences(page: dict[str, Any]) -> list[int]:
    return [item["sequence"] for item in page["items"]]


def test_pages_through_every_kept_event_in_order(client: TestClient) -> None:
    first = _get(client, limit=2)
    assert _sequences(first) == [1, 2] and first["next_cursor"]
    assert first["items"][0] == {
        **first["items"][0],
        "session": "dm:kept",
        "type": "session.started",
        "data": {"n": 1},
        "turn_id": "TURNA",
    }
    second = _get(client, limit=2, cursor=first["next_cursor"])
    assert _sequences(second) == [3, 4]
    last = _get(client, limit=2, cursor=second["next_cursor"])
    assert _sequences(last) == [5] and last["next_cursor"] is None
    assert _sequences(_get(client)) == [1, 2, 3, 4, 5]


def test_after_a_sequence_an_event_id_or_an_sse_id(client: TestClient) -> None:
    assert _sequences(_get(client, after="2")) == [3, 4, 5]
    third = _get(client)["items"][2]["id"]
    assert _sequences(_get(client, after=third)) == [4, 5]
    # An SSE event id: the stream id, then the client's place in the ledger…
    assert _sequences(_get(client, after="1700000000000-0.4")) == [5]
    # …or, for a running turn's event, that turn's n-th (TURNB starts at 3).
    assert _sequences(_get(client, after="1700000000000-0.2.TURNB.2")) == [5]
    assert _sequences(_get(client, after="99")) == []
    # A cursor wins over `after`: it is the page after the one that gave it.
    cursor = _get(client, limit=1, after="3")["next_cursor"]
    assert _sequences(_get(client, after="1", cursor=cursor)) == [5]


@pytest.mark.parametrize(
    ("after", "says"),
    [
        ("nonsense", "is not a sequence number, an SSE event id or the id of one"),
        ("1700000000000-0", "bare stream id"),
        ("1-2-3", "stream event id"),
        ("1700000000000-0.x", "stream event id"),
        ("99999999999999999999", "out of range"),
    ],
)
def test_a_bad_after_is_400_with_a_reason(client: TestClient, after: str, says: str) -> None:
    answer = client.get(URL, params={"after": after}, headers=AUTH)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_after" and says in error["message"]


def test_another_sessions_event_id_is_not_a_place_in_this_one(client: TestClient) -> None:
    theirs = _get(client)["items"][0]["id"]
    answer = client.get("/v1/sessions/dm:other/events", params={"after": theirs}, headers=AUTH)
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_after"


def test_a_bad_cursor_an_unknown_session_and_no_token(client: TestClient) -> None:
    answer = client.get(URL, params={"cursor": "bm90IG91cnM"}, headers=AUTH)
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_cursor"
    answer = client.get("/v1/sessions/dm:nobody/events", headers=AUTH)
    assert answer.status_code == 404 and "dm:nobody" in answer.json()["error"]["message"]
    assert client.get(URL).status_code == 401
