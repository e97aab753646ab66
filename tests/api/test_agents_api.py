"""/v1/agents and /v1/capabilities: personas, archive, pagination, ordered capabilities."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

AUTH = {"Authorization": "Bearer tok"}
UNKNOWN = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def _client(database: Database) -> TestClient:
    return TestClient(
        create_app(
            bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
        )
    )


def _create(client: TestClient, name: str, **fields: Any) -> dict[str, Any]:
    response = client.post("/v1/agents", json={"name": name, **fields}, headers=AUTH)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_an_agent_is_created_and_read_back(database: Database) -> None:
    client = _client(database)
    permissions = {"tools": {"allow": ["current_*"], "deny": ["noop"]}}
    created = _create(
        client,
        "atlas",
        system_prompt="Be brief.",
        default_model="scripted",
        permissions=permissions,
    )
    assert created == {
        "id": created["id"],
        "name": "atlas",
        "system_prompt": "Be brief.",
        "default_model": "scripted",
        "permissions": permissions,
        "status": "active",
        "default_model_config": {},
        "description": None,
        "emoji": None,
        "tags": [],
        "capabilities": [],
        "model_defaults": {"model": "scripted"},
    }
    fetched = client.get(f"/v1/agents/{created['id']}", headers=AUTH)
    assert fetched.status_code == 200 and fetched.json() == created
    bare = _create(client, "bare")
    assert (bare["system_prompt"], bare["default_model"], bare["permissions"]) == ("", None, {})


def test_a_duplicate_name_is_a_conflict(database: Database) -> None:
    client = _client(database)
    _create(client, "atlas")
    again = client.post("/v1/agents", json={"name": "atlas"}, headers=AUTH)
    assert again.status_code == 409
    assert again.json()["error"]["type"] == "conflict"
    assert "atlas" in again.json()["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"name": ""},
        {"name": "x" * 256},
        {"name": "line\nbreak"},
        {"name": "a", "colour": "red"},
        {"name": "a", "permissions": {"tools": {"allow": "noop"}}},
        {"name": "a", "permissions": {"tools": {"maybe": ["noop"]}}},
        {"name": "a", "permissions": {"files": {}}},
    ],
    ids=["empty", "blank", "long", "control", "extra", "not-list", "tools-key", "perm-key"],
)
def test_a_bad_create_body_is_422(database: Database, body: dict[str, Any]) -> None:
    response = _client(database).post("/v1/agents", json=body, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "invalid_request"


def test_patch_changes_only_the_given_fields(database: Database) -> None:
    client = _client(database)
    agent = _create(client, "atlas", system_prompt="old", default_model="scripted")
    _create(client, "nova")
    url = f"/v1/agents/{agent['id']}"
    renamed = client.patch(url, json={"name": "atlas-2"}, headers=AUTH)
    assert renamed.status_code == 200
    assert renamed.json() == {**agent, "name": "atlas-2"}
    cleared = client.patch(url, json={"default_model": None, "system_prompt": "new"}, headers=AUTH)
    assert cleared.json() == {
        **agent,
        "name": "atlas-2",
        "default_model": None,
        "system_prompt": "new",
        "model_defaults": {},
    }
    taken = client.patch(url, json={"name": "nova"}, headers=AUTH)
    assert taken.status_code == 409 and taken.json()["error"]["type"] == "conflict"
    assert client.get(url, headers=AUTH).json()["name"] == "atlas-2"
    for bad in ({}, {"name": None}, {"permissions": None}, {"status": "archived"}):
        refused = client.patch(url, json=bad, headers=AUTH)
        assert refused.status_code == 422, bad
        assert refused.json()["error"]["message"]


def test_delete_archives_and_the_list_hides_archived(database: Database) -> None:
    client = _client(database)
    kept = _create(client, "kept")
    gone = _create(client, "gone")
    archived = client.delete(f"/v1/agents/{gone['id']}", headers=AUTH)
    assert archived.status_code == 200 and archived.json() == {**gone, "status": "archived"}
    assert client.get(f"/v1/agents/{gone['id']}", headers=AUTH).json()["status"] == "archived"
    listed = client.get("/v1/agents", headers=AUTH).json()
    assert listed == {"items": [kept], "next_cursor": None}
    everything = client.get("/v1/agents?include_archived=true", headers=AUTH).json()
    assert [a["name"] for a in everything["items"]] == ["gone", "kept"]
    with database.unit_of_work() as uow:
        row = uow.ledger.agents.get(gone["id"])
    assert row is not None and row.status == "archived"


def test_the_list_pages_through_every_agent_once_in_order(database: Database) -> None:
    client = _client(database)
    names = ["echo", "alpha", "delta", "bravo", "charlie"]
    for name in names:
        _create(client, name)
    seen: list[str] = []
    pages = 0
    url = "/v1/agents?limit=2"
    while True:
        body = client.get(url, headers=AUTH).json()
        pages += 1
        assert len(body["items"]) <= 2
        seen += [a["name"] for a in body["items"]]
        if body["next_cursor"] is None:
            break
        url = f"/v1/agents?limit=2&cursor={body['next_cursor']}"
    assert seen == sorted(names) and pages == 3
    default = client.get("/v1/agents", headers=AUTH).json()
    assert [a["name"] for a in default["items"]] == sorted(names)


def test_bad_paging_parameters_are_refused(database: Database) -> None:
    client = _client(database)
    not_a_list = base64.urlsafe_b64encode(b'{"a": 1}').decode()
    wrong_shape = base64.urlsafe_b64encode(b"[1]").decode()
    for cursor in ("!!!", "bm90IGpzb24", not_a_list, wrong_shape):
        response = client.get(f"/v1/agents?cursor={cursor}", headers=AUTH)
        assert response.status_code == 400, cursor
        assert response.json()["error"]["type"] == "invalid_cursor"
    for limit in (0, 201, "many"):
        assert client.get(f"/v1/agents?limit={limit}", headers=AUTH).status_code == 422


def test_the_capability_catalogue_is_listed(database: Database) -> None:
    body = _client(database).get("/v1/capabilities", headers=AUTH).json()
    by_id = {c["id"]: c for c in body["items"]}
    assert by_id["noop"] == {
        "id": "noop",
        "name": "No-op",
        "description": "No-op capability for testing",
        "status": "available",
        "icon": "🔘",
        "category": "basics",
    }
    assert by_id["http"]["category"] == "web" and by_id["sandbox"]["category"] == "code"
    assert all(c["icon"] and c["category"] for c in body["items"])
    assert by_id["current_time"]["status"] == "available"
    assert by_id["research"]["status"] == "coming_soon"


def test_capabilities_are_set_in_order_and_read_back(database: Database) -> None:
    client = _client(database)
    agent = _create(client, "atlas")
    url = f"/v1/agents/{agent['id']}/capabilities"
    for order in (["current_time", "noop"], ["noop", "agents", "current_time"], []):
        response = client.put(url, json={"capabilities": order}, headers=AUTH)
        assert response.status_code == 200
        assert response.json() == {**agent, "capabilities": order}
        assert client.get(f"/v1/agents/{agent['id']}", headers=AUTH).json()["capabilities"] == order
    client.put(url, json={"capabilities": ["noop"]}, headers=AUTH)
    listed = client.get("/v1/agents", headers=AUTH).json()
    assert listed["items"][0]["capabilities"] == ["noop"]


def test_bad_capability_lists_are_refused_with_the_reason(database: Database) -> None:
    client = _client(database)
    agent = _create(client, "atlas")
    url = f"/v1/agents/{agent['id']}/capabilities"
    client.put(url, json={"capabilities": ["noop"]}, headers=AUTH)
    cases = [
        (["noop", "teleport"], "unknown_capability", "teleport"),
        (["noop", "noop"], "invalid_request", "twice"),
        (["research"], "capability_unavailable", "research"),
    ]
    for capabilities, kind, word in cases:
        response = client.put(url, json={"capabilities": capabilities}, headers=AUTH)
        assert response.status_code == 400
        assert response.json()["error"]["type"] == kind
        assert word in response.json()["error"]["message"]
    for body in (
        {},
        {"capabilities": "noop"},
        {"capabilities": [""]},
        {"capabilities": [], "x": 1},
    ):
        assert client.put(url, json=body, headers=AUTH).status_code == 422
    assert client.get(f"/v1/agents/{agent['id']}", headers=AUTH).json()["capabilities"] == ["noop"]


def test_unknown_agents_are_404(database: Database) -> None:
    client = _client(database)
    calls = [
        client.get(f"/v1/agents/{UNKNOWN}", headers=AUTH),
        client.patch(f"/v1/agents/{UNKNOWN}", json={"name": "x"}, headers=AUTH),
        client.delete(f"/v1/agents/{UNKNOWN}", headers=AUTH),
        client.put(f"/v1/agents/{UNKNOWN}/capabilities", json={"capabilities": []}, headers=AUTH),
    ]
    for response in calls:
        assert response.status_code == 404
        assert response.json()["error"]["type"] == "not_found"
        assert UNKNOWN in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}], ids=["missing", "wrong"]
)
def test_every_route_needs_the_token(database: Database, headers: dict[str, str]) -> None:
    client = _client(database)
    agent_id = _create(client, "atlas")["id"]
    calls = [
        client.get("/v1/agents", headers=headers),
        client.post("/v1/agents", json={"name": "nova"}, headers=headers),
        client.get(f"/v1/agents/{agent_id}", headers=headers),
        client.patch(f"/v1/agents/{agent_id}", json={"name": "x"}, headers=headers),
        client.delete(f"/v1/agents/{agent_id}", headers=headers),
        client.get("/v1/capabilities", headers=headers),
        client.put(
            f"/v1/agents/{agent_id}/capabilities", json={"capabilities": []}, headers=headers
        ),
    ]
    for response in calls:
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["type"] == "unauthorized" and error["message"]
    assert client.get(f"/v1/agents/{agent_id}", headers=AUTH).json()["name"] == "atlas"


def test_a_personas_description_emoji_and_tags_are_set_shown_and_changed(
    database: Database,
) -> None:
    client = _client(database)
    made = _create(
        client,
        "sage",
        description="Answers questions about the garden.",
        emoji="🌱",
        tags=["garden", "home", "garden"],
    )
    assert (made["description"], made["emoji"], made["tags"]) == (
        "Answers questions about the garden.",
        "🌱",
        ["garden", "home"],
    )
    url = f"/v1/agents/{made['id']}"
    assert client.get(url, headers=AUTH).json() == made
    listed = client.get("/v1/agents", headers=AUTH).json()["items"]
    assert [(a["emoji"], a["tags"]) for a in listed] == [("🌱", ["garden", "home"])]

    changed = client.patch(url, json={"emoji": "🌵", "tags": ["desert"]}, headers=AUTH)
    assert changed.status_code == 200, changed.text
    assert changed.json() == {**made, "emoji": "🌵", "tags": ["desert"]}
    cleared = client.patch(url, json={"description": None, "emoji": None, "tags": []}, headers=AUTH)
    assert (cleared.json()["description"], cleared.json()["emoji"], cleared.json()["tags"]) == (
        None,
        None,
        [],
    )


@pytest.mark.parametrize(
    "body",
    [
        {"emoji": "x" * 17},
        {"emoji": "\n"},
        {"emoji": ""},
        {"tags": "garden"},
        {"tags": [""]},
        {"tags": ["t" * 65]},
        {"tags": [f"t{i}" for i in range(33)]},
        {"tags": None},
        {"description": "d" * 2_001},
    ],
    ids=["emoji-long", "emoji-control", "emoji-empty", "tags-string", "tag-empty", "tag-long",
         "too-many-tags", "tags-null", "description-long"],
)  # fmt: skip
def test_bad_presentation_fields_are_422_and_change_nothing(
    database: Database, body: dict[str, Any]
) -> None:
    client = _client(database)
    made = _create(client, "sage", emoji="🌱", tags=["garden"])
    refused = client.patch(f"/v1/agents/{made['id']}", json=body, headers=AUTH)
    assert refused.status_code == 422, body
    assert refused.json()["error"]["message"]
    assert client.get(f"/v1/agents/{made['id']}", headers=AUTH).json() == made
    if body != {"tags": None}:
        created = client.post("/v1/agents", json={"name": "other", **body}, headers=AUTH)
        assert created.status_code == 422, body


def test_a_bare_default_model_is_folded_into_the_model_defaults(database: Database) -> None:
    client = _client(database)
    bare = _create(client, "bare", default_model="claude-bare")
    assert bare["model_defaults"] == {"model": "claude-bare"}
    full = _create(
        client,
        "full",
        default_model="claude-bare",
        default_model_config={"model": "claude-full", "max_tokens": 2000},
    )
    # The configuration's model wins over the bare name, as it does for the persona's sessions.
    assert full["model_defaults"] == {"model": "claude-full", "max_tokens": 2000}
