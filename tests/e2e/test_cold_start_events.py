"""The deployed topology, cold (fresh `nexus api` and `nexus worker` processes on Postgres
and Redis, the real Anthropic SDK against the local fake): once a message is answered and
Redis loses the session's stream, GET /v1/sessions/{label}/events and the SSE replay by
Last-Event-ID still have every event of the answered turn, and the stream goes on live."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import text

from nexus.db import Database
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.processes import nexus_process
from tests.integration.test_sse_streams import Listener
from tests.integration.worker_process import wait_for, worker_environment
from tests.services import REDIS_URL
from tests.support import free_port, port_open

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
TOKEN = "cold-events-token"
LABEL = "cold-events"


def _session_id(database: Database) -> str:
    with database.reading() as uow:
        found = uow.connection.execute(
            text("SELECT id FROM sessions WHERE label = :label"), {"label": LABEL}
        ).scalar_one()
    return str(found)


def _answered(database: Database) -> int:
    with database.reading() as uow:
        return int(
            uow.connection.execute(
                text(
                    "SELECT count(*) FROM turns t JOIN sessions s ON s.id = t.session_id"
                    " WHERE s.label = :label AND t.status = 'completed'"
                ),
                {"label": LABEL},
            ).scalar_one()
        )


def _all_events(client: httpx.Client) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 7}  # small pages: the paging is exercised too
    while True:
        page = client.get(f"/v1/sessions/{LABEL}/events", params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        items.extend(body["items"])
        if body["next_cursor"] is None:
            return items
        params = {"limit": 7, "cursor": body["next_cursor"]}


def _one_turn(kinds: list[str]) -> list[str]:
    """From a turn's `session.started` to its `session.completed`."""
    start = kinds.index("session.started")
    return kinds[start : kinds.index("session.completed", start) + 1]


def test_an_answered_turns_events_survive_the_loss_of_its_redis_stream(
    pg_database: Database, tmp_path: Path
) -> None:
    api_port = free_port()
    with FakeAnthropicServer() as anthropic, ExitStack() as stack:
        for answer in ("First answer.", "Second answer, watched.", "Third, live after."):
            anthropic.reply_text(answer)
        worker_settings = worker_environment(pg_database.url)
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
            **worker_settings,
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
                ["worker", "-n", "events@%h", "--concurrency", "1"], worker_log, environment
            )
        )
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")
        wait_for(lambda: b"ready." in worker_log.read_bytes(), timeout=90, what="the worker")
        base = f"http://127.0.0.1:{api_port}"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        stream_url = f"{base}/v1/sessions/{LABEL}/stream"
        with httpx.Client(base_url=base, headers=auth, timeout=30) as client:
            sent = client.post(f"/v1/sessions/{LABEL}/messages", json={"content": "hi"})
            assert sent.status_code == 202, sent.text
            wait_for(lambda: _answered(pg_database) >= 1, timeout=90, what="the first turn")

            # A client watches the second turn live.
            watching = Listener(stream_url, headers=auth)
            watching.connected()
            sent = client.post(f"/v1/sessions/{LABEL}/messages", json={"content": "again"})
            assert sent.status_code == 202, sent.text
            watching.wait_for(
                "the second turn, live",
                lambda: "session.completed" in [kind for _, kind in watching.events()],
                timeout=90,
            )
            live = watching.events()
            watched = _one_turn([kind for _, kind in live])
            assert "message.delta" in watched and "turn.committed" in watched

            # Redis loses the session's stream (what FLUSHDB does to it).
            session_id = _session_id(pg_database)
            key = f"{worker_settings['NEXUS_BROKER_PREFIX']}stream:{session_id}"
            with redis.Redis.from_url(REDIS_URL) as store:
                assert store.delete(key) == 1

            # The ledger has every event of the answered turn.
            kept = _all_events(client)
            turns = list(dict.fromkeys(item["turn_id"] for item in kept))
            assert len(turns) == 2
            second = [item["type"] for item in kept if item["turn_id"] == turns[1]]
            assert second == watched
            assert [item["sequence"] for item in kept] == list(range(1, len(kept) + 1))

            # The SSE replay from before the second turn has all of it, then goes on live.
            started = [kind for _, kind in live].index("session.started")
            first_turn = [item for item in kept if item["turn_id"] == turns[0]]
            # What the client saw last before the turn (or, had it seen nothing, the place
            # after the first turn as an SSE id names it).
            before = live[started - 1][0] if started else f"0-0.{first_turn[-1]['sequence']}"
            again = Listener(stream_url, headers={**auth, "Last-Event-ID": before})
            again.wait_for("the replay", lambda: len(again.events()) >= len(second), timeout=30)
            replayed = [kind for _, kind in again.events()]
            assert _one_turn(replayed) == second
            sent = client.post(f"/v1/sessions/{LABEL}/messages", json={"content": "third"})
            assert sent.status_code == 202, sent.text
            again.wait_for(
                "the third turn, live",
                lambda: [kind for _, kind in again.events()].count("session.completed") == 2,
                timeout=90,
            )
            after_replay = [kind for _, kind in again.events()][len(replayed) :]
            third = [item["type"] for item in _all_events(client) if item["turn_id"] not in turns]
            assert _one_turn(after_replay) == third
    assert len(anthropic.requests) == 3
