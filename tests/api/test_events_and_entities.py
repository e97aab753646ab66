"""Authenticated routes: custom-bridge events, event lookup, entity merges; token checks."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.access.policy import load_policies
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings
from tests.support import route_one

TOKEN = "tok-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(database: Database, **settings: Any) -> tuple[TestClient, RecordingDoorbell]:
    doorbell = RecordingDoorbell()
    config = Settings(**{"api_tokens": TOKEN, **settings})
    return TestClient(create_app(bootstrap(config, database=database, doorbell=doorbell))), doorbell


def _imessage(event_id: str = "imessage:p:+15551234567/1") -> dict[str, Any]:
    return {
        "id": event_id,
        "adapter": "imessage",
        "platform": "imessage",
        "sender": {"id": "+15551234567", "display_name": "Mom"},
        "container": {"kind": "dm", "id": "+15551234567"},
        "text": "What's the 2FA code from Amazon?",
        "occurred_at": 1706889800000,
    }


def test_a_bridge_event_is_ingested_once_and_can_be_looked_up(database: Database) -> None:
    client, doorbell = _client(database)
    first = client.post("/v1/events", json=_imessage(), headers=AUTH)
    again = client.post("/v1/events", json=_imessage(), headers=AUTH)
    assert first.status_code == 202
    # Stored under the caller's namespace, apart from any platform's ids.
    stored = f"api:{hashlib.sha256(TOKEN.encode()).hexdigest()[:8]}:imessage:p:+15551234567/1"
    assert first.json() == {"event_id": stored, "duplicate": False, "routable": True}
    assert again.status_code == 200 and again.json() == first.json() | {"duplicate": True}
    assert doorbell.events == [stored]
    found = client.get(f"/v1/events/{stored}", headers=AUTH)
    assert found.status_code == 200
    assert (found.json()["status"], found.json()["sender_name"]) == ("received", "Mom")
    assert client.get("/v1/events/nope", headers=AUTH).status_code == 404


def test_a_bad_event_body_is_422_with_the_field(database: Database) -> None:
    client, _ = _client(database)
    body = _imessage()
    del body["occurred_at"]
    response = client.post("/v1/events", json=body, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "invalid_request"
    assert "occurred_at" in response.json()["error"]["message"]


def test_a_bridge_event_keeps_its_attachments_and_refuses_ones_out_of_bounds(
    database: Database,
) -> None:
    client, _ = _client(database)
    photo = {
        "kind": "image",
        "url": "https://files.example.com/p/1.jpg",
        "mime_type": "image/jpeg",
        "name": "receipt.jpg",
        "size": 48_213,
        "width": 1280,
        "height": 960,
    }
    body = _imessage("imessage:p:+15551234567/2") | {"text": "", "attachments": [photo]}
    stored = client.post("/v1/events", json=body, headers=AUTH)
    assert stored.status_code == 202, stored.text
    found = client.get(f"/v1/events/{stored.json()['event_id']}", headers=AUTH).json()
    assert [{k: v for k, v in a.items() if v is not None} for a in found["attachments"]] == [photo]
    # Over the bounds: a clear 422 naming the field, and nothing stored.
    for bad in ({**photo, "size": -1}, {**photo, "name": "x" * 256}):
        refused = client.post(
            "/v1/events",
            json=_imessage("imessage:p:+15551234567/3") | {"attachments": [bad]},
            headers=AUTH,
        )
        assert refused.status_code == 422 and "attachments" in refused.json()["error"]["message"]
    too_many = _imessage("imessage:p:+15551234567/4") | {"attachments": [photo] * 21}
    assert client.post("/v1/events", json=too_many, headers=AUTH).status_code == 422
    with database.reading() as uow:
        assert uow.ledger.events.get(stored.json()["event_id"].replace("/2", "/3")) is None


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "Bearer"),
        ({"Authorization": "Bearer wrong"}, "not valid"),
        ({"Authorization": f"Basic {TOKEN}"}, "Bearer"),
    ],
    ids=["missing", "wrong", "not-bearer"],
)
def test_authenticated_routes_refuse_bad_tokens(
    database: Database, headers: dict[str, str], message: str
) -> None:
    client, _ = _client(database)
    for method, path in (
        ("post", "/v1/events"),
        ("get", "/v1/events/x"),
        ("post", "/v1/entities/merge"),
    ):
        if method == "post":
            response = client.post(path, headers=headers, json={})
        else:
            response = client.get(path, headers=headers)
        assert response.status_code == 401, path
        assert message in response.json()["error"]["message"]


def test_without_tokens_the_api_is_closed_unless_open_on_loopback(database: Database) -> None:
    closed = TestClient(
        create_app(bootstrap(Settings(), database=database, doorbell=RecordingDoorbell()))
    )
    response = closed.get("/v1/events/x")
    assert response.status_code == 401
    assert "NEXUS_API_TOKENS" in response.json()["error"]["message"]
    dev = create_app(
        bootstrap(Settings(), database=database, doorbell=RecordingDoorbell()),
        open_on_loopback=True,
    )
    assert TestClient(dev, client=("127.0.0.1", 5000)).get("/v1/events/x").status_code == 404
    assert TestClient(dev, client=("203.0.113.9", 5000)).get("/v1/events/x").status_code == 401


def test_merge_through_the_api(database: Database) -> None:
    client, doorbell = _client(database)
    stored = []
    for number, event_id in (("+1", "imessage:a"), ("+2", "imessage:b")):
        body = _imessage(event_id) | {
            "sender": {"id": number},
            "container": {"kind": "dm", "id": number},
        }
        stored.append(client.post("/v1/events", json=body, headers=AUTH).json()["event_id"])
    with database.unit_of_work() as uow:
        for event_id in stored:
            route_one(uow, event_id, load_policies(None), doorbell)
        first = uow.ledger.identity.contact_entity("imessage", "+1")
        second = uow.ledger.identity.contact_entity("imessage", "+2")
        uow.commit()
    response = client.post(
        "/v1/entities/merge", json={"into": first, "merge": [second]}, headers=AUTH
    )
    assert response.status_code == 200
    assert response.json()["root"] == first
    assert response.json()["aliases_created"] == [f"dm:{second}"]
    again = client.post("/v1/entities/merge", json={"into": first, "merge": [second]}, headers=AUTH)
    assert again.status_code == 409
    unknown = client.post(
        "/v1/entities/merge", json={"into": "ent_x", "merge": [first]}, headers=AUTH
    )
    assert unknown.status_code == 404
    empty = client.post("/v1/entities/merge", json={"into": first, "merge": []}, headers=AUTH)
    assert empty.status_code == 422
