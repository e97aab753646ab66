"""Model configuration over HTTP: persona defaults, a session's own, a message's own; the
turn that ran shows what it ran with, and thinking is shown with the turn's messages."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.adapters.scripted import Say, signed
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
THINKING = {"type": "enabled", "budget_tokens": 2048}


def _client(database: Database) -> TestClient:
    graph = bootstrap(
        Settings(api_tokens="tok", api_admin_tokens="tok", model="scripted"),
        database=database,
        doorbell=RecordingDoorbell(),
        coordination=InProcessCoordination(),
    )
    return TestClient(create_app(graph))


def _persona(client: TestClient, name: str, config: dict[str, Any]) -> dict[str, Any]:
    answer = client.post(
        "/v1/agents", json={"name": name, "default_model_config": config}, headers=AUTH
    )
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _session(client: TestClient, label: str, persona: str) -> None:
    created = client.post("/v1/sessions", json={"label": label, "persona": persona}, headers=AUTH)
    assert created.status_code == 201, created.text


def _patch(client: TestClient, label: str, config: dict[str, Any] | None) -> Any:
    return client.patch(f"/v1/sessions/{label}", json={"model_config": config}, headers=AUTH)


def test_a_persona_keeps_its_model_defaults_and_a_patch_changes_the_fields_given(
    database: Database,
) -> None:
    client = _client(database)
    made = _persona(client, "sage", {"model": "claude-x", "temperature": 0.4})
    assert made["default_model_config"] == {"model": "claude-x", "temperature": 0.4}
    changed = client.patch(
        f"/v1/agents/{made['id']}",
        json={"default_model_config": {"max_tokens": 3000, "temperature": None}},
        headers=AUTH,
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["default_model_config"] == {"model": "claude-x", "max_tokens": 3000}


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"thinking": {"budget_tokens": 512}}, "at least 1024"),
        ({"temperature": 2}, "from 0 to 1"),
        ({"thinking": THINKING, "temperature": 0.5}, "cannot be set with"),
        ({"thinking": THINKING, "max_tokens": 2048}, "below max_tokens"),
        ({"top_p": 0.3}, "no field 'top_p'"),
    ],
)
def test_a_config_the_api_would_refuse_is_422_everywhere(
    database: Database, config: dict[str, Any], says: str
) -> None:
    client = _client(database)
    refused = client.post(
        "/v1/agents", json={"name": "bad", "default_model_config": config}, headers=AUTH
    )
    assert refused.status_code == 422 and says in refused.text
    _session(client, "chat", "atlas")
    assert _patch(client, "chat", config).status_code == 422
    sent = client.post(
        "/v1/sessions/chat/messages", json={"content": "hi", "model_config": config}, headers=AUTH
    )
    assert sent.status_code == 422 and says in sent.json()["error"]["message"]
    detail = client.get("/v1/sessions/chat", headers=AUTH).json()
    assert detail["model_overrides"] is None and detail["pending"]["count"] == 0


def test_a_session_shows_each_field_with_its_layer_and_a_patch_merges(
    database: Database,
) -> None:
    client = _client(database)
    _persona(client, "sage", {"model": "claude-persona", "max_tokens": 3000})
    _session(client, "chat", "sage")
    settings = client.get("/v1/sessions/chat", headers=AUTH).json()["model_settings"]
    assert settings["model"] == {"value": "claude-persona", "source": "persona"}
    assert settings["thinking"] == {"value": None, "source": "default"}
    changed = _patch(client, "chat", {"model": "claude-session", "thinking": THINKING})
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert body["model_overrides"] == {"model": "claude-session", "thinking": THINKING}
    assert body["model_settings"]["model"] == {"value": "claude-session", "source": "session"}
    assert body["model_settings"]["thinking"] == {"value": THINKING, "source": "session"}
    assert body["model_settings"]["max_tokens"] == {"value": 3000, "source": "persona"}
    # A null field clears that field only; null clears the session's own altogether.
    assert _patch(client, "chat", {"model": None}).json()["model_overrides"] == {
        "thinking": THINKING
    }
    cleared = _patch(client, "chat", None).json()
    assert cleared["model_overrides"] is None
    assert cleared["model_settings"]["model"]["source"] == "persona"


def test_a_session_config_that_clashes_with_its_persona_is_422_and_changes_nothing(
    database: Database,
) -> None:
    client = _client(database)
    _persona(client, "warm", {"temperature": 0.9})
    _session(client, "chat", "warm")
    refused = _patch(client, "chat", {"thinking": THINKING})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["type"] == "invalid_model_config"
    assert "temperature (from the persona)" in error["message"]
    assert client.get("/v1/sessions/chat", headers=AUTH).json()["model_overrides"] is None
    # Switching the persona's temperature off is not a thing; thinking off is, and fits.
    assert _patch(client, "chat", {"thinking": {"type": "disabled"}}).status_code == 200


def test_a_message_and_an_event_carry_their_turns_config(database: Database) -> None:
    client = _client(database)
    _session(client, "chat", "atlas")
    sent = client.post(
        "/v1/sessions/chat/messages",
        json={"content": "think", "model_config": {"thinking": THINKING}},
        headers=AUTH,
    )
    assert sent.status_code == 202, sent.text
    posted = client.post(
        "/v1/events",
        json={
            "id": "bridge:1",
            "adapter": "bridge",
            "platform": "bridge",
            "text": "hello",
            "occurred_at": 1_700_000_000_000,
            "model_config": {"max_tokens": 1500, "temperature": None},
        },
        headers=AUTH,
    )
    assert posted.status_code == 202, posted.text
    with database.unit_of_work() as uow:
        message = uow.ledger.events.get(sent.json()["event_id"])
        event = uow.ledger.events.get(posted.json()["event_id"])
    assert message is not None and message.model_overrides == {"thinking": THINKING}
    assert event is not None and event.model_overrides == {"max_tokens": 1500}
    bad = client.post(
        "/v1/events",
        json={
            "id": "bridge:2",
            "adapter": "bridge",
            "platform": "bridge",
            "text": "x",
            "occurred_at": 1_700_000_000_000,
            "model_config": {"temperature": 3},
        },
        headers=AUTH,
    )
    assert bad.status_code == 422


def test_the_turn_shows_the_config_it_ran_with_and_its_thinking(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session("chat")
    client = _client(database)
    sent = client.post(
        "/v1/sessions/chat/messages",
        json={"content": "think", "model_config": {"thinking": THINKING}},
        headers=AUTH,
    )
    assert sent.status_code == 202, sent.text
    rig.model.push(Say("Done.", thinking="Let me think."))
    runner = SessionRunner(
        database=database,
        turns=rig.turns,
        coordination=InProcessCoordination(),
        doorbell=RecordingDoorbell(),
        clock=clock,
    )
    assert runner.run(session.id).turns == 1
    assert rig.model.requests[-1].thinking == 2048
    head = client.get("/v1/sessions/chat", headers=AUTH).json()["thread_id"]
    turn = client.get(f"/v1/turns/{head}", headers=AUTH).json()
    settings = turn["turn"]["model_settings"]
    assert settings["thinking"] == THINKING and settings["sources"]["thinking"] == "turn"
    answer = turn["messages"][-1]["content"]
    assert answer["thinking"] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": signed("Let me think.")}
    ]


def test_the_route_primitive_carries_a_turns_config_and_refuses_a_bad_one(
    database: Database,
) -> None:
    client = _client(database)
    _session(client, "chat", "atlas")
    routed = client.post(
        "/v1/route",
        json={"session": "chat", "content": "think", "model_config": {"thinking": THINKING}},
        headers=AUTH,
    )
    assert routed.status_code == 202, routed.text
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(routed.json()["event_id"])
    assert event is not None and event.model_overrides == {"thinking": THINKING}
    _persona(client, "warm", {"temperature": 0.9})
    _session(client, "warm-chat", "warm")
    clash = client.post(
        "/v1/route",
        json={"session": "warm-chat", "content": "x", "model_config": {"thinking": THINKING}},
        headers=AUTH,
    )
    assert clash.status_code == 422 and clash.json()["error"]["type"] == "invalid_model_config"
    detail = client.get("/v1/sessions/warm-chat", headers=AUTH).json()
    assert detail["pending"]["count"] == 0
