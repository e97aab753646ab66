"""Outbound delivery on real worker processes, Postgres and Redis: webhook-style ingest →
router → turn → deliveries → the fake platform, with a worker killed mid-send, and a
backlog's replies leaving with their turns."""

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
from nexus.ledger.enums import DeliveryStatus, QueueMode
from nexus.ledger.records import DeliveryRecord, NewSession
from nexus.ledger.repository.identity import auto_entity_id
from nexus.settings import Settings
from tests.fakes.platform_server import FakePlatforms, Received
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


def _answered_in_turn_order(database: Database, session_id: str) -> list[int]:
    """The platform message each committed turn answered, in the ledger's turn order."""
    with database.reading() as uow:
        found = uow.connection.exec_driver_sql(
            "SELECT e.message_id FROM turns t JOIN events e ON e.id = t.source_event_id"
            " WHERE t.session_id = %(s)s AND t.status = 'completed' ORDER BY t.epoch",
            {"s": session_id},
        ).scalars()
        return [int(message_id) for message_id in found]


def _send_all(database: Database, environment: dict[str, str], events: list[NexusEvent]) -> None:
    """Stored in one transaction, so they wait together: a backlog before any worker runs."""
    settings = Settings(
        database_url=database.url,
        redis_url=environment["NEXUS_REDIS_URL"],
        broker_prefix=environment["NEXUS_BROKER_PREFIX"],
    )
    with database.unit_of_work() as uow:
        ingest(uow, events, CeleryDoorbell(create_celery(settings)))
        uow.commit()


def _deliveries(database: Database) -> list[DeliveryRecord]:
    with database.unit_of_work() as uow:
        turn_ids = uow.ledger.connection.exec_driver_sql("SELECT id FROM turns").scalars()
        return [d for t in list(turn_ids) for d in uow.ledger.deliveries.for_turn(t)]


def _event(adapter: str, number: int = 1, message_id: int = 55) -> NexusEvent:
    where = Container(kind="dm", id="4242") if adapter == "telegram" else None
    return NexusEvent(
        id=f"{adapter}:{number}",
        adapter=adapter,
        platform=adapter,
        sender=Author(id="4242", display_name="Ada"),
        container=where or Container(kind="group", id="C7"),
        message_id=str(message_id),
        text="hello there",
        occurred_at=number,
    )


def _progress(database: Database, session_id: str) -> tuple[int, int]:
    """The session's committed turns, and its inputs taken (claimed or done) so far."""
    with database.reading() as uow:
        return (
            int(
                uow.connection.exec_driver_sql(
                    "SELECT count(*) FROM turns WHERE session_id = %(s)s AND status = 'completed'",
                    {"s": session_id},
                ).scalar_one()
            ),
            int(
                uow.connection.exec_driver_sql(
                    "SELECT count(*) FROM queue_items WHERE session_id = %(s)s"
                    " AND status IN ('claimed', 'done')",
                    {"s": session_id},
                ).scalar_one()
            ),
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


def test_a_backlogs_replies_leave_with_their_turns(
    pg_database: Database, tmp_path: Path, fake: FakePlatforms
) -> None:
    """One worker thread, ten messages waiting for one session in `queue` mode: the run takes
    them one turn each, and each turn's reply reaches the platform before the next turn is
    claimed (so before its model call), not after the whole run."""
    environment = _environment(pg_database, fake)
    with pg_database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        label = f"dm:{auto_entity_id('telegram', '4242')}"
        session = NewSession(label=label, persona_id=persona.id, queue_mode=QueueMode.QUEUE)
        session_id = uow.ledger.sessions.ensure(session).id
        uow.commit()
    # What the ledger said as each reply reached the platform (the sender waits meanwhile).
    seen: list[tuple[int, int]] = []

    def look(request: Received) -> None:
        if request.kind == "telegram":
            seen.append(_progress(pg_database, session_id))

    fake.on_request = look
    messages = 10
    _send_all(
        pg_database,
        environment,
        [_event("telegram", n, message_id=100 + n) for n in range(1, messages + 1)],
    )
    with celery_worker(environment, tmp_path / "worker.log", queues=QUEUES):  # solo: one thread
        wait_for(lambda: len(fake.of("telegram")) == messages, timeout=120, what="the replies")
    assert _progress(pg_database, session_id) == (messages, messages), "one turn per message"
    # The k-th reply went out with turn k committed and turn k+1 not yet claimed.
    assert seen == [(k, k) for k in range(1, messages + 1)]
    # ...and answers turn k's message: the replies reach the platform in the turns' order.
    answered = [m.body["reply_parameters"]["message_id"] for m in fake.of("telegram")]
    assert answered == _answered_in_turn_order(pg_database, session_id)
    assert sorted(answered) == [100 + n for n in range(1, messages + 1)]
    rows = _deliveries(pg_database)
    assert [d.status for d in rows] == [DeliveryStatus.SENT] * messages
    assert [d.attempts for d in rows] == [1] * messages, "each sent once"
