"""PATCH and GET /v1/sessions/{label}: queue settings with their sources, and archiving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.support import route_one

TOKEN = "tok-settings"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(database: Database, **settings: Any) -> TestClient:
    config = Settings(api_tokens=TOKEN, api_admin_tokens=TOKEN, **settings)
    return TestClient(
        create_app(bootstrap(config, database=database, doorbell=RecordingDoorbell()))
    )


def _queue(client: TestClient, label: str) -> dict[str, Any]:
    found: dict[str, Any] = client.get(f"/v1/sessions/{label}", headers=AUTH).json()["queue"]
    return found


def test_settings_are_set_shown_with_their_source_and_cleared(database: Database) -> None:
    client = _client(database, queue_cap=20, collect_window_ms=1_000)
    client.post("/v1/sessions", json={"label": "tuned"}, headers=AUTH)
    assert _queue(client, "tuned") == {
        "mode": {"value": None, "source": "default"},
        "cap": {"value": 20, "source": "default"},
        "drop": {"value": "summarize", "source": "default"},
        "debounce_ms": {"value": 1_000, "source": "default"},
        "policy": None,
    }
    body = {"queue_mode": "collect", "cap": 5, "drop": "old", "debounce_ms": 2_500}
    changed = client.patch("/v1/sessions/tuned", json=body, headers=AUTH)
    assert changed.status_code == 200
    assert changed.json()["queue"]["cap"] == {"value": 5, "source": "session"}
    assert changed.json()["queue_cap"] == 5 and changed.json()["drop_policy"] == "old"
    shown = _queue(client, "tuned")
    assert shown["mode"] == {"value": "collect", "source": "session"}
    assert shown["debounce_ms"] == {"value": 2_500, "source": "session"}
    cleared = client.patch("/v1/sessions/tuned", json={"cap": None}, headers=AUTH)
    assert cleared.json()["queue"]["cap"] == {"value": 20, "source": "default"}
    assert cleared.json()["queue"]["drop"]["source"] == "session"  # left as it was


def test_a_policy_layer_is_shown_for_the_sessions_it_keys(
    database: Database, tmp_path: Path
) -> None:
    policies = tmp_path / "policies.yaml"
    policies.write_text(
        "- name: calm-dms\n"
        "  match: {delivery: {peer_kind: dm}}\n"
        '  session: {key: "dm:{principal.entity_id}", persona: atlas, queue_cap: 7}\n'
    )
    client = _client(database, policies=str(policies))
    event = {
        "id": "sms:1",
        "adapter": "sms",
        "platform": "sms",
        "sender": {"id": "+1"},
        "container": {"kind": "dm", "id": "+1"},
        "text": "hi",
        "occurred_at": 0,
    }
    posted = client.post("/v1/events", json=event, headers=AUTH)
    assert posted.status_code == 202, posted.text
    stored = posted.json()["event_id"]
    graph = client.app.state.nexus.nexus  # type: ignore[attr-defined]
    with database.unit_of_work() as uow:
        routed = route_one(uow, stored, graph.policies, RecordingDoorbell())
        uow.commit()
    shown = _queue(client, routed.session_label or "")
    assert shown["cap"] == {"value": 7, "source": "policy"} and shown["policy"] == "calm-dms"
    client.patch(f"/v1/sessions/{routed.session_label}", json={"cap": 3}, headers=AUTH)
    assert _queue(client, routed.session_label or "")["cap"] == {"value": 3, "source": "session"}


def test_an_archived_session_refuses_messages_with_409_and_stays_readable(
    database: Database,
) -> None:
    client = _client(database)
    client.post("/v1/sessions/old/messages", json={"content": "hello"}, headers=AUTH)
    archived = client.patch("/v1/sessions/old", json={"archived": True}, headers=AUTH)
    assert archived.status_code == 200 and archived.json()["status"] == "archived"
    refused = client.post("/v1/sessions/old/messages", json={"content": "more"}, headers=AUTH)
    assert refused.status_code == 409
    assert refused.json()["error"]["type"] == "session_archived"
    compact = client.post("/v1/sessions/old/compact", json={}, headers=AUTH)
    assert compact.status_code == 409
    assert client.get("/v1/sessions/old/queue", headers=AUTH).json()["items"][0]["status"]
    assert len(client.get("/v1/sessions/old/queue", headers=AUTH).json()["items"]) == 1
    back = client.patch("/v1/sessions/old", json={"archived": False}, headers=AUTH)
    assert back.json()["status"] == "active"
    again = client.post("/v1/sessions/old/messages", json={"content": "more"}, headers=AUTH)
    assert again.status_code == 202


def test_bad_settings_are_refused_and_change_nothing(database: Database) -> None:
    client = _client(database)
    client.post("/v1/sessions", json={"label": "s"}, headers=AUTH)
    bad = [
        ({}, 400),
        ({"cap": 0}, 422),
        ({"cap": "many"}, 422),
        ({"drop": "random"}, 422),
        ({"debounce_ms": -1}, 422),
        ({"debounce_ms": 3_600_001}, 422),
        ({"queue_mode": "eventually"}, 422),
        ({"archived": None}, 422),
        ({"colour": "blue"}, 422),
    ]
    answers = [client.patch("/v1/sessions/s", json=body, headers=AUTH) for body, _ in bad]
    assert [a.status_code for a in answers] == [status for _, status in bad]
    assert all("error" in a.json() for a in answers)
    assert client.patch("/v1/sessions/nope", json={"cap": 3}, headers=AUTH).status_code == 404
    shown = client.get("/v1/sessions/s", headers=AUTH).json()
    assert (shown["queue_cap"], shown["drop_policy"], shown["status"]) == (None, None, "active")
