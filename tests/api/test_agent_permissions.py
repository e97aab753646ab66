"""/v1/agents: credentials, sandbox and network in a persona's permissions, checked as a turn
reads them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.permissions import read_permissions
from nexus.engine.sandbox import SandboxConfig
from nexus.settings import Settings

AUTH = {"Authorization": "Bearer tok"}


def _client(database: Database) -> TestClient:
    graph = bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    return TestClient(create_app(graph))


def test_credentials_and_a_sandbox_are_stored_and_read_back(database: Database) -> None:
    client = _client(database)
    permissions = {
        "tools": {"deny": ["noop"]},
        "credentials": ["github", "weather_api"],
        "sandbox": {"timeout_seconds": 5, "memory_mb": 128},
        "network": {"allow": ["10.0.0.0/8", "intranet.example.com"]},
    }
    created = client.post(
        "/v1/agents", json={"name": "coder", "permissions": permissions}, headers=AUTH
    )
    assert created.status_code == 201, created.text
    assert created.json()["permissions"] == permissions
    url = f"/v1/agents/{created.json()['id']}"
    granted = {"sandbox": {"network": True}}
    changed = client.patch(url, json={"permissions": granted}, headers=AUTH)
    assert changed.status_code == 200 and changed.json()["permissions"] == granted
    with database.unit_of_work() as uow:
        stored = uow.ledger.agents.get(created.json()["id"])
    assert stored is not None
    assert read_permissions(stored.permissions).sandbox == SandboxConfig(network=True)
    assert read_permissions(stored.permissions).credentials == ()
    assert read_permissions(stored.permissions).network.allow_networks == ()


@pytest.mark.parametrize(
    ("permissions", "says"),
    [
        ({"credential": ["github"]}, "credential"),
        ({"credentials": "github"}, "credentials"),
        ({"credentials": ["GitHub"]}, "credentials"),
        ({"credentials": ["has space"]}, "credentials"),
        ({"credentials": ["github", "github"]}, "twice"),
        ({"credentials": [f"c{n}" for n in range(65)]}, "credentials"),
        ({"sandbox": True}, "sandbox"),
        ({"sandbox": {"disk": True}}, "disk"),
        ({"sandbox": {"network": "yes"}}, "network"),
        ({"sandbox": {"timeout_seconds": 0}}, "timeout_seconds"),
        ({"sandbox": {"timeout_seconds": "5"}}, "timeout_seconds"),
        ({"sandbox": {"memory_mb": 1}}, "memory_mb"),
        ({"sandbox": {"memory_mb": 100.5}}, "memory_mb"),
        ({"network": ["10.0.0.0/8"]}, "network"),
        ({"network": {"deny": ["10.0.0.0/8"]}}, "deny"),
        ({"network": {"allow": ["10.0.0.0/33"]}}, "neither a host name"),
        ({"network": {"allow": [f"h{n}.test" for n in range(65)]}}, "allow"),
    ],
)
def test_bad_permissions_are_422_on_create_and_patch_and_change_nothing(
    database: Database, permissions: dict[str, Any], says: str
) -> None:
    client = _client(database)
    refused = client.post(
        "/v1/agents", json={"name": "a", "permissions": permissions}, headers=AUTH
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["type"] == "invalid_request"
    assert says in refused.json()["error"]["message"]
    assert client.get("/v1/agents", headers=AUTH).json()["items"] == []
    agent = client.post("/v1/agents", json={"name": "b"}, headers=AUTH).json()
    url = f"/v1/agents/{agent['id']}"
    patched = client.patch(url, json={"permissions": permissions}, headers=AUTH)
    assert patched.status_code == 422 and says in patched.json()["error"]["message"]
    assert client.get(url, headers=AUTH).json()["permissions"] == {}
