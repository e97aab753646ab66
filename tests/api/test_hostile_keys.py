"""Ids, labels and names a database cannot hold (too long for the column, NUL, lone
surrogates, control characters) are a 422 in the one error shape on every route that takes
them, never a 500; and the OpenAPI document says the rule (maxLength, pattern)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.strings import column_length
from nexus.settings import Settings

AUTH = {"Authorization": "Bearer tok"}


def _client(database: Database) -> TestClient:
    graph = bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    return TestClient(create_app(graph), raise_server_exceptions=False)


def _refused(answer: Any, field: str) -> None:
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request"
    assert field in error["message"]


def _raw(body: dict[str, Any]) -> dict[str, Any]:
    """The body as JSON text that keeps NUL and lone surrogates as \\u escapes."""
    return {"content": json.dumps(body), "headers": {**AUTH, "Content-Type": "application/json"}}


def _entity(client: TestClient) -> str:
    created = client.post("/v1/entities", json={"name": "Ada"}, headers=AUTH)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


@pytest.mark.parametrize("length", [65, 255, 260])
def test_a_platform_longer_than_its_column_is_422(database: Database, length: int) -> None:
    # contacts.platform holds 64 characters: 65 to 255 once reached the database (a 500).
    assert column_length("contacts", "platform") == 64
    client = _client(database)
    ada = _entity(client)
    body = {"platform": "0" * length, "sender_id": "0"}
    _refused(client.post(f"/v1/entities/{ada}/contacts", json=body, headers=AUTH), "platform")


@pytest.mark.parametrize("bad", ["ent\x00a", "ent\ud800", "\udfff", "a" * 65, ""])
def test_merge_refuses_ids_no_entity_can_have(database: Database, bad: str) -> None:
    client = _client(database)
    ada = _entity(client)
    for body, field in (
        ({"into": bad, "merge": [ada]}, "into"),
        ({"into": ada, "merge": [bad]}, "merge"),
    ):
        _refused(client.post("/v1/entities/merge", **_raw(body)), field)


@pytest.mark.parametrize("query", ["platform=%13%C3%88&sender_id=00", "platform=a&sender_id=%0A"])
def test_detaching_a_contact_with_control_characters_is_422(database: Database, query: str) -> None:
    client = _client(database)
    ada = _entity(client)
    answer = client.delete(f"/v1/entities/{ada}/contacts?{query}", headers=AUTH)
    _refused(answer, "platform" if query.startswith("platform=%13") else "sender_id")


def test_lone_surrogates_in_free_text_are_422(database: Database) -> None:
    client = _client(database)
    sent = client.post("/v1/sessions/s/messages", **_raw({"content": "hi \ud800"}))
    _refused(sent, "content")
    named = client.post("/v1/entities", **_raw({"name": "Ada \udc00"}))
    _refused(named, "name")


def test_ids_longer_than_their_column_are_422_in_path_and_query(database: Database) -> None:
    client = _client(database)
    for url, field in (
        (f"/v1/turns/{'t' * 27}", "turn_id"),
        (f"/v1/agents/{'a' * 27}", "agent_id"),
        (f"/v1/entities/{'e' * 65}", "entity_id"),
        (f"/v1/hooks/{'h' * 256}/invocations", "name"),
        (f"/v1/sessions/{'s' * 513}", "label"),
        (f"/v1/usage?persona={'p' * 256}", "persona"),
        ("/v1/sessions/a%01b/turns", "label"),
    ):
        _refused(client.get(url, headers=AUTH), field)


def test_the_openapi_document_says_the_rules(database: Database) -> None:
    document = _client(database).get("/openapi.json").json()
    keys = {"label", "alias", "turn_id", "agent_id", "entity_id", "item_id", "name", "adapter"}
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["name"] in keys:
                    schema = parameter["schema"]
                    assert schema.get("maxLength") and schema.get("pattern"), (method, path)
                    checked += 1
            if path.startswith("/v1/"):
                declared = operation["responses"]["422"]["content"]["application/json"]
                assert declared["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert checked > 25
    label = document["components"]["schemas"]["CreateSession"]["properties"]["label"]
    assert (label["maxLength"], label["pattern"]) == (512, r"^[^\x00-\x1f\x7f/]+$")
