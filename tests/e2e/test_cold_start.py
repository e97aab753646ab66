"""The deployed topology, cold: fresh `nexus api` and `nexus worker` processes on Postgres and
Redis, the real Anthropic SDK against the local fake. The first message a person sends after
the worker starts is answered, whatever the worker's first turn takes to set up (its first
use of the SDK imports it: seconds, on a cold process)."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from nexus.db import Database
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.processes import nexus_process
from tests.integration.worker_process import wait_for, worker_environment
from tests.support import free_port, port_open

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
TOKEN = "cold-start-token"


def _turns(database: Database, label: str) -> list[tuple[str, str | None]]:
    with database.reading() as uow:
        rows = uow.connection.execute(
            text(
                "SELECT t.status, t.stop_reason FROM turns t JOIN sessions s"
                " ON s.id = t.session_id WHERE s.label = :label ORDER BY t.started_at"
            ),
            {"label": label},
        ).all()
    return [(row[0], row[1]) for row in rows]


def test_the_first_api_message_to_a_cold_worker_is_answered(
    pg_database: Database, tmp_path: Path
) -> None:
    api_port = free_port()
    with FakeAnthropicServer() as anthropic, ExitStack() as stack:
        anthropic.reply_text("Hello from the model.")
        anthropic.reply_text("And hello again.")
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
            **worker_environment(pg_database.url),
            "NEXUS_API_TOKENS": TOKEN,
            "ANTHROPIC_API_KEY": "sk-ant-test-cold",
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "NEXUS_MODEL": "claude-sonnet-4-5",
            "NEXUS_LOG_LEVEL": "INFO",
        }
        api_log, worker_log = tmp_path / "api.log", tmp_path / "worker.log"
        stack.enter_context(nexus_process(["api", "--port", str(api_port)], api_log, environment))
        stack.enter_context(
            nexus_process(
                ["worker", "-n", "cold@%h", "--concurrency", "1"], worker_log, environment
            )
        )
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")
        wait_for(lambda: b"ready." in worker_log.read_bytes(), timeout=90, what="the worker")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(
            base_url=f"http://127.0.0.1:{api_port}", headers=headers, timeout=30
        ) as client:
            sent = client.post("/v1/sessions/cold/messages", json={"content": "hi, first one"})
            assert sent.status_code == 202, sent.text

            def answered(count: int) -> bool:
                done = [s for s, _ in _turns(pg_database, "cold") if s != "pending"]
                return len(done) >= count

            wait_for(lambda: answered(1), timeout=90, what="the first turn")
            assert _turns(pg_database, "cold")[0] == ("completed", "end_turn"), (
                _turns(pg_database, "cold"),
                worker_log.read_text()[-3000:],
            )
            sent = client.post("/v1/sessions/cold/messages", json={"content": "and a second"})
            assert sent.status_code == 202, sent.text
            wait_for(lambda: answered(2), timeout=60, what="the second turn")
            turns = client.get("/v1/sessions/cold/turns").json()
    assert [s for s, _ in _turns(pg_database, "cold")] == ["completed", "completed"]
    assert len(anthropic.requests) == 2
    said = json.dumps(
        [
            m["content"]
            for view in turns["turns"]
            for m in view["messages"]
            if m["role"] == "assistant"
        ]
    )
    assert "Hello from the model." in said and "And hello again." in said
