"""`GET /v1/status` (what `nexus status` prints) against a real Celery worker on Redis: the
worker that runs is named, and once it stops the status says no worker answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.settings import Settings
from tests.integration.worker_process import celery_worker, worker_environment

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
AUTH = {"Authorization": "Bearer tok"}


def test_status_names_the_running_worker_and_fails_without_one(
    pg_database: Database, tmp_path: Path
) -> None:
    environment = worker_environment(pg_database.url)
    settings = Settings(
        database_url=pg_database.url,
        redis_url=environment["NEXUS_REDIS_URL"],
        broker_prefix=environment["NEXUS_BROKER_PREFIX"],
        api_tokens="tok",
    )
    client = TestClient(create_app(bootstrap(settings, database=pg_database)))
    with celery_worker(environment, tmp_path / "worker.log", queues="events"):
        running = client.get("/v1/status", headers=AUTH).json()
    assert len(running["workers"]) == 1 and "@" in running["workers"][0]
    assert not any("worker" in problem for problem in running["problems"])
    assert running["redis_maxmemory_policy"] is not None  # read from the real Redis
    stopped = client.get("/v1/status", headers=AUTH).json()
    assert stopped["workers"] == [] and stopped["ok"] is False
    assert any("no worker answered a ping" in problem for problem in stopped["problems"])
