"""The router on a real Celery worker: webhook → event → worker → session queue item."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ingest.service import ingest
from nexus.ledger.enums import EventStatus
from nexus.ledger.models import Event, QueueItem, table_of
from nexus.settings import Settings
from tests.api.test_inbound import HEADERS, TOKEN, _update
from tests.contract.test_routing import _message
from tests.integration.worker_process import celery_worker, wait_for, worker_environment

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def _count(database: Database, model: type) -> int:
    with database.unit_of_work() as uow:
        return int(
            uow.connection.execute(select(func.count()).select_from(table_of(model))).scalar_one()
        )


def _processed(database: Database, event_id: str) -> bool:
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(event_id)
    return event is not None and event.status == EventStatus.PROCESSED


def test_ten_concurrent_deliveries_make_one_event_and_one_queue_item(
    pg_database: Database, tmp_path: Path
) -> None:
    environment = worker_environment(pg_database.url)
    settings = Settings(
        database_url=pg_database.url,
        redis_url=environment["NEXUS_REDIS_URL"],
        broker_prefix=environment["NEXUS_BROKER_PREFIX"],
        telegram_secret_token=TOKEN,
    )
    app = create_app(bootstrap(settings, database=pg_database))

    async def deliver_ten() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://nexus.test") as client:
            body = json.dumps(_update(update_id=77))
            return await asyncio.gather(
                *(client.post("/v1/inbound/telegram", content=body, headers=HEADERS)
                  for _ in range(10))
            )  # fmt: skip

    with celery_worker(environment, tmp_path / "worker.log"):
        responses = asyncio.run(deliver_ten())
        assert [r.status_code for r in responses] == [200] * 10
        wait_for(lambda: _processed(pg_database, "telegram:77"), what="the router")
    # One inbound event (the router may also have answered it inline: a reply is outbound).
    with pg_database.unit_of_work() as uow:
        inbound = uow.connection.execute(
            select(func.count())
            .select_from(table_of(Event))
            .where(table_of(Event).c.direction == "inbound")
        ).scalar_one()
    assert inbound == 1
    assert _count(pg_database, QueueItem) == 1
    with pg_database.unit_of_work() as uow:
        event = uow.ledger.events.get("telegram:77")
    assert event is not None and event.disposition == "queued"
    assert "event_routed" in (tmp_path / "worker.log").read_text()


def test_the_relay_routes_an_event_whose_doorbell_was_lost(
    pg_database: Database, tmp_path: Path
) -> None:
    with pg_database.unit_of_work() as uow:
        ingest(uow, [_message("telegram:lost", "telegram", "42")], RecordingDoorbell())
        uow.commit()  # rung into a doorbell nobody hears: as if Redis had been flushed
    with celery_worker(worker_environment(pg_database.url), tmp_path / "worker.log"):
        wait_for(lambda: _processed(pg_database, "telegram:lost"), what="the relay")
    assert _count(pg_database, QueueItem) == 1
