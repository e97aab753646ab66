"""/v1/turns: one turn, its ancestry, and forking a session from it."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ids import new_id
from nexus.ledger.enums import MessageRole, TurnStatus
from nexus.ledger.records import MessageDraft, ToolCallDraft, TurnDraft
from nexus.settings import Settings
from tests.support import build_chain, new_session, text_turn

AUTH = {"Authorization": "Bearer tok"}
UNKNOWN = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def _client(database: Database) -> TestClient:
    return TestClient(
        create_app(
            bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
        )
    )


def _chain(database: Database, count: int = 3) -> list[str]:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger, "main")
        chain = build_chain(uow.ledger, session, count)
        uow.commit()
    return chain


def _texts(turn: dict[str, Any]) -> list[str]:
    return [m["content"]["text"] for m in turn["messages"]]


def test_a_turn_comes_with_its_messages_and_tool_calls(database: Database) -> None:
    chain = _chain(database)
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get_by_label("main")
        assert session is not None
        epoch = uow.ledger.sessions.claim(session.id)
        draft = TurnDraft(
            id=new_id(),
            session_id=session.id,
            parent_turn_id=chain[-1],
            started_at=0,
            messages=(MessageDraft(role=MessageRole.USER, content={"text": "what time?"}),),
            tool_calls=(
                ToolCallDraft(
                    provider_call_id="call_1",
                    tool_name="current_time",
                    parameters={},
                    result="noon",
                    started_at=0,
                    completed_at=1,
                ),
            ),
        )
        assert uow.ledger.turns.commit(draft, epoch=epoch).committed
        uow.commit()
    client = _client(database)
    middle = client.get(f"/v1/turns/{chain[1]}", headers=AUTH)
    assert middle.status_code == 200
    body = middle.json()
    assert (body["turn"]["id"], body["turn"]["parent_turn_id"]) == (chain[1], chain[0])
    assert body["turn"]["status"] == "completed" and body["turn"]["turn_type"] == "normal"
    assert _texts(body) == ["question 1", "re: question 1"]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["tool_calls"] == []
    with_tool = client.get(f"/v1/turns/{draft.id}", headers=AUTH).json()
    [call] = with_tool["tool_calls"]
    assert (call["tool_name"], call["provider_call_id"], call["result"]) == (
        "current_time",
        "call_1",
        "noon",
    )


def test_the_thread_is_the_whole_ancestry_oldest_first(database: Database) -> None:
    chain = _chain(database)
    client = _client(database)
    body = client.get(f"/v1/turns/{chain[2]}/thread", headers=AUTH).json()
    assert body["turn_id"] == chain[2]
    assert [t["turn"]["id"] for t in body["turns"]] == chain
    assert [_texts(t) for t in body["turns"]] == [
        [f"question {n}", f"re: question {n}"] for n in range(3)
    ]
    root = client.get(f"/v1/turns/{chain[0]}/thread", headers=AUTH).json()
    assert [t["turn"]["id"] for t in root["turns"]] == chain[:1]


def test_a_failed_attempt_shows_its_parents_ancestry_and_cannot_be_forked(
    database: Database,
) -> None:
    chain = _chain(database, 2)
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get_by_label("main")
        assert session is not None
        failed = text_turn(session, chain[-1], "boom", status=TurnStatus.FAILED)
        uow.ledger.turns.record_attempt(failed, epoch=uow.ledger.sessions.claim(session.id))
        uow.commit()
    client = _client(database)
    body = client.get(f"/v1/turns/{failed.id}/thread", headers=AUTH).json()
    assert [t["turn"]["id"] for t in body["turns"]] == [*chain, failed.id]
    assert body["turns"][-1]["turn"]["status"] == "failed"
    refused = client.post(f"/v1/turns/{failed.id}/fork", json={}, headers=AUTH)
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "not_forkable"


def test_forking_turn_two_makes_a_session_headed_there(database: Database) -> None:
    chain = _chain(database)
    client = _client(database)
    response = client.post(f"/v1/turns/{chain[1]}/fork", json={"label": "what-if"}, headers=AUTH)
    assert response.status_code == 201
    fork = response.json()
    with database.unit_of_work() as uow:
        original = uow.ledger.sessions.get_by_label("main")
        stored = uow.ledger.sessions.resolve("what-if")
    assert original is not None and stored is not None
    assert fork == stored.model_dump(mode="json")
    assert (fork["label"], fork["thread_id"], fork["origin"]) == ("what-if", chain[1], "fork")
    assert fork["persona_id"] == original.persona_id and fork["id"] != original.id
    assert original.thread_id == chain[2]  # the original keeps its own head
    head = client.get(f"/v1/turns/{fork['thread_id']}/thread", headers=AUTH).json()
    assert [t["turn"]["id"] for t in head["turns"]] == chain[:2]
    unnamed = client.post(f"/v1/turns/{chain[0]}/fork", headers=AUTH)
    assert unnamed.status_code == 201 and unnamed.json()["label"].startswith("fork-")
    assert unnamed.json()["thread_id"] == chain[0]


def test_a_taken_label_is_a_conflict_and_a_bad_label_is_422(database: Database) -> None:
    chain = _chain(database)
    client = _client(database)
    assert client.post(f"/v1/turns/{chain[1]}/fork", json={"label": "b"}, headers=AUTH).is_success
    for label in ("b", "main"):
        taken = client.post(f"/v1/turns/{chain[0]}/fork", json={"label": label}, headers=AUTH)
        assert taken.status_code == 409
        assert taken.json()["error"]["type"] == "conflict"
        assert label in taken.json()["error"]["message"]
    for body in ({"label": ""}, {"label": "a\nb"}, {"label": "x" * 513}, {"name": "c"}):
        refused = client.post(f"/v1/turns/{chain[0]}/fork", json=body, headers=AUTH)
        assert refused.status_code == 422, body
        assert refused.json()["error"]["type"] == "invalid_request"


def test_unknown_turns_are_404(database: Database) -> None:
    client = _client(database)
    calls = [
        client.get(f"/v1/turns/{UNKNOWN}", headers=AUTH),
        client.get(f"/v1/turns/{UNKNOWN}/thread", headers=AUTH),
        client.post(f"/v1/turns/{UNKNOWN}/fork", json={"label": "x"}, headers=AUTH),
    ]
    for response in calls:
        assert response.status_code == 404
        assert response.json()["error"] == {
            "type": "not_found",
            "message": f"no turn {UNKNOWN!r}",
        }


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}], ids=["missing", "wrong"]
)
def test_every_route_needs_the_token(database: Database, headers: dict[str, str]) -> None:
    chain = _chain(database)
    client = _client(database)
    calls = [
        client.get(f"/v1/turns/{chain[0]}", headers=headers),
        client.get(f"/v1/turns/{chain[0]}/thread", headers=headers),
        client.post(f"/v1/turns/{chain[0]}/fork", json={"label": "x"}, headers=headers),
    ]
    for response in calls:
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["type"] == "unauthorized" and error["message"]
    with database.unit_of_work() as uow:
        assert uow.ledger.sessions.resolve("x") is None
