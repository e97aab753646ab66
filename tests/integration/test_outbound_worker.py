"""Outbound delivery on real worker processes, Postgres and Redis: webhook-style ingest →
router → turn → deliveries → the fake platform, with a worker killed mid-send."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.adapters.celery_broker import CeleryDoorbell, create_celery
from nexus.db import Database
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord
from nexus.settings import Settings
from tests.fakes.platform_server import FakePlatforms
from tests.integration.worker_process import celery_worker, wait_for, worker_environment

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
LEASE_MS = 1_500
QUEUES = "events,sessions,delivery"


@pytest.fixture
def fake() -> Iterator[FakePlatforms]:
    with FakePlatforms() as platforms:
        yield platforms


def _environment(database: Database, fake: FakePlatforms) -> dict[str, str]:
    return {
        **worker_environment(database.url),
        "NEXUS_MODEL": "scripted",
        "NEXUS_TELEGRAM_BOT_TOKEN": "123:TEST",
        "NEXUS_TELEGRAM_API_BASE": fake.base_url,
        "NEXUS_DISCORD_BOT_TOKEN": "discord-test",
        "NEXUS_DISCORD_API_BASE": fake.base_url,
        "NEXUS_DELIVERY_LEASE_MS": str(LEASE_MS),
    }


def _send(database: Database, environment: dict[str, str], event: NexusEvent) -> None:
    settings = Settings(
        database_url=database.url,
        redis_url=environment["NEXUS_REDIS_URL"],
        broker_prefix=environment["NEXUS_BROKER_PREFIX"],
    )
    with database.unit_of_work() as uow:
        ingest(uow, [event], CeleryDoorbell(create_celery(settings)))
        uow.commit()


def _deliveries(database: Database) -> list[DeliveryRecord]:
    with database.unit_of_work() as uow:
        turn_ids = uow.ledger.connection.exec_driver_sql("SELECT id FROM turns").scalars()
        return [d for t in list(turn_ids) for d in uow.ledger.deliveries.for_turn(t)]


def _event(adapter: str) -> NexusEvent:
    where = Container(kind="dm", id="4242") if adapter == "telegram" else None
    return NexusEvent(
        id=f"{adapter}:1",
        adapter=adapter,
        platform=adapter,
        sender=Author(id="4242", display_name="Ada"),
        container=where or Container(kind="group", id="C7"),
        message_id="55",
        text="hello there",
        occurred_at=0,
    )


@pytest.mark.parametrize(
    ("adapter", "kind", "settled"),
    [
        # No idempotency key: not sent again, recorded as failed with an unknown outcome.
        ("telegram", "telegram", DeliveryStatus.FAILED),
        # An enforced nonce: sent again, and the platform keeps one message.
        ("discord", "discord_channel", DeliveryStatus.SENT),
    ],
)
def test_a_worker_killed_after_the_send_does_not_make_a_second_message(
    pg_database: Database,
    tmp_path: Path,
    fake: FakePlatforms,
    adapter: str,
    kind: str,
    settled: DeliveryStatus,
) -> None:
    environment = _environment(pg_database, fake)
    fake.hold_next(kind)  # the platform takes the message and never answers
    with celery_worker(environment, tmp_path / "first.log", queues=QUEUES) as first:
        _send(pg_database, environment, _event(adapter))
        assert fake.held.wait(timeout=60), "the reply never reached the platform"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    [lost] = _deliveries(pg_database)
    assert lost.status == DeliveryStatus.SENDING and lost.attempts == 1
    time.sleep(LEASE_MS / 1000)  # the dead worker's lease lapses
    with celery_worker(environment, tmp_path / "second.log", queues=QUEUES):
        wait_for(
            lambda: _deliveries(pg_database)[0].status == settled,
            timeout=30,
            what=f"the lapsed send to settle as {settled}",
        )
        time.sleep(1.0)  # room for a wrong second send to show up
    [row] = _deliveries(pg_database)
    assert len(fake.of(kind)) == 1, "the person got the reply twice"
    if settled == DeliveryStatus.FAILED:
        assert "outcome unknown" in (row.error or "") and len(fake.requests) == 1
    else:
        assert row.attempts == 2 and len(fake.requests) == 2


def test_a_429_then_200_is_delivered_once_after_the_platforms_wait(
    pg_database: Database, tmp_path: Path, fake: FakePlatforms
) -> None:
    environment = _environment(pg_database, fake)
    fake.fail_next(
        "telegram",
        429,
        {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 2",
         "parameters": {"retry_after": 2}},
    )  # fmt: skip
    with celery_worker(environment, tmp_path / "worker.log", queues=QUEUES):
        _send(pg_database, environment, _event("telegram"))
        wait_for(lambda: len(fake.messages) == 1, timeout=60, what="the reply")
        time.sleep(0.5)
    first, second = fake.requests
    assert second.at - first.at >= 2.0, "the platform's retry_after was not honoured"
    [row] = _deliveries(pg_database)
    assert row.status == DeliveryStatus.SENT and row.attempts == 2
    assert second.body["reply_parameters"]["message_id"] == 55
