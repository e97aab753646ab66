"""The distributed topology as plain processes on loopback — `nexus api`, two `nexus worker`,
one `nexus beat`, `nexus flower` — on real Postgres and Redis, as compose would run them."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from nexus.db import Database
from nexus.ledger.enums import QueueStatus
from tests.fakes.platform_server import FakePlatforms
from tests.integration.processes import nexus_process, telegram_update
from tests.integration.worker_process import wait_for, worker_environment
from tests.support import free_port, port_open

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
CANARY = "canary-5e2d8c41"
SENDERS, PER_SENDER = 10, 10
FLOWER_AUTH = ("ops", f"{CANARY}-flower")


def _secrets() -> dict[str, str]:
    """The canary in every secret setting the run uses or could log."""
    return {
        "NEXUS_TELEGRAM_SECRET_TOKEN": f"{CANARY}-telegram",
        "NEXUS_TELEGRAM_BOT_TOKEN": f"123:{CANARY}-bot",
        "NEXUS_SLACK_SIGNING_SECRET": f"{CANARY}-slack",
        "NEXUS_SLACK_BOT_TOKEN": f"xoxb-{CANARY}",
        "NEXUS_WHATSAPP_APP_SECRET": f"{CANARY}-whatsapp",
        "NEXUS_TWILIO_AUTH_TOKEN": f"{CANARY}-twilio",
        "NEXUS_GITHUB_WEBHOOK_SECRET": f"{CANARY}-github",
        "NEXUS_API_TOKENS": f"{CANARY}-api",
        "NEXUS_FLOWER_BASIC_AUTH": ":".join(FLOWER_AUTH),
        "ANTHROPIC_API_KEY": "",  # the scripted model answers
    }


def test_the_distributed_topology_handles_100_messages_and_logs_no_secret(
    pg_database: Database, tmp_path: Path
) -> None:
    api_port, flower_port = free_port(), free_port()
    with FakePlatforms() as platforms, ExitStack() as stack:
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
            **worker_environment(pg_database.url),
            **_secrets(),
            "NEXUS_TELEGRAM_API_BASE": platforms.base_url,
            "NEXUS_LOG_LEVEL": "INFO",
        }
        processes = (
            ("api", ["api", "--port", str(api_port)]),
            ("worker1", ["worker", "-n", "worker1@%h", "--concurrency", "2"]),
            ("worker2", ["worker", "-n", "worker2@%h", "--concurrency", "2"]),
            ("beat", ["beat"]),
            ("flower", ["flower", "--port", str(flower_port)]),
        )
        logs = [tmp_path / f"{name}.log" for name, _ in processes]
        for (_, args), log in zip(processes, logs, strict=True):
            stack.enter_context(nexus_process(args, log, environment))
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")
        wait_for(lambda: port_open(flower_port), timeout=60, what="Flower")
        wait_for(
            lambda: all(b"ready." in (tmp_path / f"worker{n}.log").read_bytes() for n in (1, 2)),
            timeout=90,
            what="both workers",
        )
        headers = {"X-Telegram-Bot-Api-Secret-Token": f"{CANARY}-telegram"}
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=30) as client:
            for number in range(SENDERS * PER_SENDER):
                sent = client.post(
                    "/v1/inbound/telegram",
                    json=telegram_update(number, number % SENDERS),
                    headers=headers,
                )
                assert sent.status_code == 200, sent.text

            def settled() -> bool:
                with pg_database.unit_of_work() as uow:
                    rows = uow.connection.execute(
                        text("SELECT status FROM queue_items WHERE event_id LIKE :pattern"),
                        {"pattern": "telegram:%"},
                    ).scalars()
                    statuses = list(rows)
                return len(statuses) == 100 and all(s == QueueStatus.DONE for s in statuses)

            wait_for(settled, timeout=180, what="all 100 messages answered")
            metrics = client.get("/metrics", headers={"Authorization": f"Bearer {CANARY}-api"}).text
            sessions = client.get(
                "/v1/sessions", headers={"Authorization": f"Bearer {CANARY}-api"}
            ).json()
        with httpx.Client(base_url=f"http://127.0.0.1:{flower_port}", auth=FLOWER_AUTH) as flower:
            wait_for(
                lambda: len(flower.get("/api/workers?refresh=1", timeout=20).json()) == 2,
                timeout=60,
                what="Flower to list both workers",
            )
            workers = flower.get("/api/workers", timeout=10).json()
            tasks = flower.get("/api/tasks", timeout=10).json()
            assert flower.get("/api/workers").request.headers.get("authorization")
            assert httpx.get(f"http://127.0.0.1:{flower_port}/api/workers").status_code == 401
        wait_for(lambda: len(platforms.of("telegram")) >= 10, timeout=60, what="replies sent")
    assert sorted(name.split("@")[0] for name in workers) == ["worker1", "worker2"]
    names = {task["name"] for task in tasks.values()}
    assert {"nexus.event.process", "nexus.session.run"} <= names
    counted = 'nexus_events_total{adapter="telegram",direction="inbound",disposition="queued"}'
    assert f"{counted} 100.0" in metrics
    assert len([s for s in sessions["items"] if s["label"].startswith("dm:")]) == SENDERS
    leaked = [
        f"{path.name}: {line}"
        for path in logs
        for line in path.read_text(errors="replace").splitlines()
        if CANARY in line
    ]
    assert leaked == [], "\n".join(leaked[:5])
    turns_logged = sum(path.read_text().count("turn_committed") for path in logs[1:3])
    assert turns_logged > 0
    assert all(
        json.loads(line) for line in logs[0].read_text().splitlines() if line.startswith("{")
    )
