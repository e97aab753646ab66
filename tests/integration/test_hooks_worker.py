"""The hooks on a real Celery worker: a message sent through the API reaches them by the
`nexus.event.hooks` task, as a platform message does through the router."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.hooks.registry import register_directory
from nexus.settings import Settings
from tests.api.test_hooks_see_api_messages import WATCHER
from tests.integration.worker_process import celery_worker, wait_for, worker_environment

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_a_worker_runs_the_hooks_on_a_message_sent_through_the_api(
    pg_database: Database, tmp_path: Path
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "watcher.py").write_text(WATCHER)
    environment = worker_environment(pg_database.url) | {"NEXUS_HOOKS_DIR": str(hooks)}
    settings = Settings(
        database_url=pg_database.url,
        redis_url=environment["NEXUS_REDIS_URL"],
        broker_prefix=environment["NEXUS_BROKER_PREFIX"],
        hooks_dir=str(hooks),
        api_tokens="tok",
    )
    graph = bootstrap(settings, database=pg_database)
    problems: list[str] = []
    register_directory(graph.fresh_hook_runner(on_problem=problems.append), hooks, problems,
                       allow_empty=False)  # fmt: skip
    client = TestClient(create_app(graph))

    def seen() -> list[str]:
        with pg_database.unit_of_work() as uow:
            watcher = uow.ledger.hooks.get("watcher")
        return list(watcher.state.get("seen", [])) if watcher else []

    # `nexus.event.hooks` is routed to the events queue (its name starts `nexus.event.`).
    with celery_worker(environment, tmp_path / "worker.log", queues="events,hooks"):
        sent = client.post(
            "/v1/sessions/main/messages",
            json={"content": "sent through the API"},
            headers={"Authorization": "Bearer tok"},
        )
        assert sent.status_code == 202, sent.text
        wait_for(lambda: seen() == ["sent through the API"], what="the hook")
    with pg_database.unit_of_work() as uow:
        calls = uow.ledger.hooks.invocations_of("watcher")
    assert [call["event_id"] for call in calls] == [sent.json()["event_id"]]
