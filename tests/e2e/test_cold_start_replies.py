"""The deployed topology, cold (fresh `nexus api` and `nexus worker` processes on Postgres
and Redis, the real Anthropic SDK against the local fake, Telegram in and out through the
fake platform): a backlog's replies interleave with its turns. Messages that wait for one
session in `queue` mode are answered one turn each, and each turn's reply reaches the
platform before the next turn's model call, in the turns' order, on a worker with a single
process, rather than all of them after the run."""

from __future__ import annotations

import os
import threading
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from nexus.db import Database
from nexus.ledger.enums import QueueMode
from nexus.ledger.records import NewSession
from nexus.ledger.repository.identity import auto_entity_id
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.platform_server import FakePlatforms, Received
from tests.integration.processes import nexus_process, telegram_update
from tests.integration.worker_process import wait_for, worker_environment
from tests.support import free_port, port_open

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
SECRET = "cold-replies-telegram-secret"
SENDER = 5
MESSAGES = 6


def _queue_mode_session(database: Database) -> str:
    """The person's DM session, made beforehand in `queue` mode: one turn per message."""
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        label = f"dm:{auto_entity_id('telegram', str(7000 + SENDER))}"
        session = NewSession(label=label, persona_id=persona.id, queue_mode=QueueMode.QUEUE)
        found = uow.ledger.sessions.ensure(session).id
        uow.commit()
    return found


def _answered_in_turn_order(database: Database, session_id: str) -> list[int]:
    """The Telegram message each completed turn answered, in the ledger's turn order."""
    with database.reading() as uow:
        found = uow.connection.execute(
            text(
                "SELECT e.message_id FROM turns t JOIN events e ON e.id = t.source_event_id"
                " WHERE t.session_id = :session AND t.status = 'completed' ORDER BY t.epoch"
            ),
            {"session": session_id},
        ).scalars()
        return [int(message_id) for message_id in found]


def test_a_backlogs_replies_reach_the_platform_between_its_turns(
    pg_database: Database, tmp_path: Path
) -> None:
    session_id = _queue_mode_session(pg_database)
    api_port = free_port()
    with FakeAnthropicServer() as anthropic, FakePlatforms() as platforms, ExitStack() as stack:
        for number in range(1, MESSAGES + 1):
            anthropic.reply_text(f"Answer {number}.")
        # How many model calls had begun as each reply reached the platform (the worker
        # waits for the platform's answer meanwhile, so nothing moves on under the look).
        calls_at_reply: list[int] = []
        lock = threading.Lock()

        def look(request: Received) -> None:
            if request.kind == "telegram":
                with lock:
                    calls_at_reply.append(len(anthropic.requests))

        platforms.on_request = look
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
            **worker_environment(pg_database.url),
            "NEXUS_API_TOKENS": "cold-replies-token",
            "ANTHROPIC_API_KEY": "sk-ant-test-cold",
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "NEXUS_MODEL": "claude-sonnet-4-5",
            "NEXUS_LOG_LEVEL": "INFO",
            "NEXUS_TELEGRAM_SECRET_TOKEN": SECRET,
            "NEXUS_TELEGRAM_BOT_TOKEN": "123:cold-replies",
            "NEXUS_TELEGRAM_API_BASE": platforms.base_url,
        }
        api_log, worker_log = tmp_path / "api.log", tmp_path / "worker.log"
        stack.enter_context(nexus_process(["api", "--port", str(api_port)], api_log, environment))
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")
        # The backlog: every message stored (and its router rung) before any worker runs.
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=30) as client:
            for number in range(1, MESSAGES + 1):
                update = telegram_update(number, SENDER)
                posted = client.post("/v1/inbound/telegram", json=update, headers=headers)
                assert posted.status_code == 200, posted.text
        stack.enter_context(
            nexus_process(
                ["worker", "-n", "replies@%h", "--concurrency", "1"], worker_log, environment
            )
        )
        wait_for(
            lambda: len(platforms.of("telegram")) == MESSAGES,
            timeout=120,
            what=f"the {MESSAGES} replies",
        )
        replies = platforms.of("telegram")
        answered = _answered_in_turn_order(pg_database, session_id)
    assert len(anthropic.requests) == MESSAGES, "one turn per message"
    # Reply k reached the platform after turn k's model call and before turn k+1's.
    assert calls_at_reply == list(range(1, MESSAGES + 1)), worker_log.read_text()[-3000:]
    # ...and answers turn k's message: the replies go out in the turns' order.
    assert [m.body["reply_parameters"]["message_id"] for m in replies] == answered
    assert sorted(answered) == list(range(1, MESSAGES + 1))
    assert [m.body["text"] for m in replies] == [f"Answer {n}." for n in range(1, MESSAGES + 1)]
