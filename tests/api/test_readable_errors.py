"""A 422 names each bad field and what it accepts in plain words, with the structured list
beside it as `details`, in the one error shape."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

TOKEN = "tok-errors"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(database: Database) -> TestClient:
    config = Settings(api_tokens=TOKEN, api_admin_tokens=TOKEN)
    client = TestClient(
        create_app(bootstrap(config, database=database, doorbell=RecordingDoorbell()))
    )
    assert client.post("/v1/sessions", json={"label": "s1"}, headers=AUTH).status_code == 201
    return client


def _error(client: TestClient, method: str, url: str, body: Any) -> dict[str, Any]:
    answer = client.request(method, url, json=body, headers=AUTH)
    assert answer.status_code == 422, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert set(error) == {"type", "message", "details"}
    assert error["type"] == "invalid_request"
    assert "{'" not in error["message"] and "loc" not in error["message"]  # no Python repr
    return error


def test_a_bad_choice_names_the_field_and_its_choices(database: Database) -> None:
    error = _error(_client(database), "PATCH", "/v1/sessions/s1", {"drop": "oldest"})
    assert error["message"] == "drop: must be one of old, new, summarize"
    assert error["details"] == [
        {
            "loc": "body.drop",
            "type": "literal_error",
            "message": "must be one of old, new, summarize",
        }
    ]


@pytest.mark.parametrize(
    ("method", "url", "body", "says", "loc"),
    [
        ("POST", "/v1/sessions", {}, "label: is required", "body.label"),
        ("PATCH", "/v1/sessions/s1", {"cap": "lots"}, "cap: must be a whole number", "body.cap"),
        ("PATCH", "/v1/sessions/s1", {"cap": 0}, "cap: must be at least 1", "body.cap"),
        (
            "PATCH",
            "/v1/sessions/s1",
            {"bogus": 1},
            "bogus: is not a field here",
            "body.bogus",
        ),
        (
            "POST",
            "/v1/sessions/s1/compact",
            {"instructions": "x" * 4001},
            "instructions: must be at most 4000 characters",
            "body.instructions",
        ),
        (
            "POST",
            "/v1/sessions/s1/messages",
            {"content": ""},
            "content: must not be empty",
            "body.content",
        ),
    ],
)
def test_each_kind_of_bad_field_is_said_in_words(
    database: Database, method: str, url: str, body: Any, says: str, loc: str
) -> None:
    error = _error(_client(database), method, url, body)
    assert error["message"].startswith(says)
    assert [detail["loc"] for detail in error["details"]] == [loc]
    assert "input" not in error["details"][0]


def test_every_bad_field_is_named_at_once(database: Database) -> None:
    error = _error(
        _client(database), "PATCH", "/v1/sessions/s1", {"drop": "x", "cap": -1, "extra": 1}
    )
    assert "drop: must be one of" in error["message"]
    assert "cap: must be at least 1" in error["message"]
    assert "extra: is not a field here" in error["message"]
    assert {detail["loc"] for detail in error["details"]} == {
        "body.drop",
        "body.cap",
        "body.extra",
    }


def test_a_bad_query_parameter_says_where_it_was(database: Database) -> None:
    answer = _client(database).get("/v1/sessions?limit=many", headers=AUTH)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["message"] == "limit (query): must be a whole number"
    assert error["details"][0]["loc"] == "query.limit"


def test_a_body_that_is_not_json_says_so(database: Database) -> None:
    answer = _client(database).post(
        "/v1/sessions", content=b"{bad", headers={**AUTH, "Content-Type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["error"]["message"].startswith("body: is not valid JSON")


def test_the_openapi_error_body_declares_details(database: Database) -> None:
    document = _client(database).app.openapi()  # type: ignore[attr-defined]
    detail = document["components"]["schemas"]["ErrorDetail"]["properties"]
    assert {"type", "message", "details"} <= set(detail)
    field = document["components"]["schemas"]["FieldError"]["properties"]
    assert set(field) == {"loc", "type", "message"}
