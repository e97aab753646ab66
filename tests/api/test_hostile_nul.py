"""NUL (%00) in a request's path or query is 400 on every route the app serves, never a 500
from a database that cannot hold it."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

AUTH = {"Authorization": "Bearer tok"}


def _client(database: Database) -> tuple[TestClient, dict[str, dict[str, object]]]:
    app = create_app(
        bootstrap(Settings(api_tokens="tok"), database=database, doorbell=RecordingDoorbell())
    )
    return TestClient(app, raise_server_exceptions=False), app.openapi()["paths"]


def test_nul_in_the_path_or_query_of_every_route_is_400(database: Database) -> None:
    client, paths = _client(database)
    checked = 0
    for template, operations in paths.items():
        with_nul = re.sub(r"\{[^}]+\}", "a%00b", template)
        plain = re.sub(r"\{[^}]+\}", "a", template)
        candidates = [f"{plain}?persona=a%00b&limit=1%00", f"{plain}?%00=1"]
        if with_nul != template:
            candidates.append(with_nul)
        for method in operations:
            for url in candidates:
                answer = client.request(method.upper(), url, headers=AUTH)
                assert answer.status_code == 400, (method, url, answer.text)
                assert answer.json()["error"]["type"] == "malformed_request"
                assert "NUL" in answer.json()["error"]["message"]
                checked += 1
    assert checked > 60  # every route was tried, not an empty document


def test_nul_is_refused_before_the_token_is_asked_for(database: Database) -> None:
    client, _ = _client(database)
    answer = client.get("/v1/sessions/a%00b")
    assert answer.status_code == 400


def test_a_route_without_nul_is_answered_as_before(database: Database) -> None:
    client, _ = _client(database)
    literal = client.get("/v1/sessions?persona=a%2500b", headers=AUTH)  # "%00", not NUL
    assert literal.status_code == 404, literal.text
    assert "'a%00b'" in literal.json()["error"]["message"]
    assert client.get("/healthz").status_code == 200
