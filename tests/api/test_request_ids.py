"""Every answer carries X-Request-ID (the caller's when sane), the request's logs carry it
too, and each answer is timed by its route's template."""

from __future__ import annotations

import io

import pytest
import structlog
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.logs import configure_logging
from nexus.settings import Settings
from nexus.telemetry import REGISTRY

AUTH = {"Authorization": "Bearer tok"}


def _client(database: Database) -> TestClient:
    settings = Settings(api_tokens="tok", metrics_public=True)
    app = create_app(bootstrap(settings, database=database, doorbell=RecordingDoorbell()))
    return TestClient(app)


@pytest.mark.parametrize(
    ("given", "kept"),
    [("abc-123", True), ("a" * 128, True), ("a" * 129, False), ("two words", False), ("", False)],
)
def test_a_sane_id_is_kept_and_any_other_replaced(
    database: Database, given: str, kept: bool
) -> None:
    answer = _client(database).get("/v1/sessions", headers={**AUTH, "X-Request-ID": given})
    assert answer.status_code == 200
    returned = answer.headers["X-Request-ID"]
    assert (returned == given) is kept
    assert returned and len(returned) <= 128


def test_a_refusal_carries_an_id_too_and_each_answer_a_new_one(database: Database) -> None:
    client = _client(database)
    first = client.get("/v1/sessions")  # no token: the request guard's 401
    second = client.get("/v1/sessions")
    assert first.status_code == 401
    assert first.headers["X-Request-ID"] != second.headers["X-Request-ID"]


def test_the_requests_logs_carry_its_id(database: Database) -> None:
    stream = io.StringIO()
    configure_logging(Settings(log_format="json"), stream=stream)
    try:
        client = _client(database)

        def logs_something() -> None:  # a sync route: run in a thread, as most are
            structlog.get_logger("route").info("inside")

        client.app.add_api_route("/v1/logs-something", logs_something)  # type: ignore[attr-defined]
        answer = client.get("/v1/logs-something", headers={**AUTH, "X-Request-ID": "trace-9"})
        assert answer.status_code == 200
        structlog.get_logger("outside").info("after")
    finally:
        configure_logging(Settings())
    lines = stream.getvalue().splitlines()
    assert any('"inside"' in line and '"request_id": "trace-9"' in line for line in lines), lines
    assert all("trace-9" not in line for line in lines if '"after"' in line)


def test_answers_are_timed_by_route_template_and_status(database: Database) -> None:
    client = _client(database)

    def count() -> float:
        labels = {"route": "/v1/sessions/{label:path}", "status": "404"}
        value = REGISTRY.get_sample_value("nexus_http_request_duration_seconds_count", labels)
        return value or 0.0

    before = count()
    client.get("/v1/sessions/one", headers=AUTH)
    client.get("/v1/sessions/two", headers=AUTH)
    assert count() == before + 2
    scraped = client.get("/metrics").text
    assert 'nexus_http_request_duration_seconds_count{route="/v1/sessions/{label:path}"' in scraped
