"""Redis restarted and flushed, Postgres restarted, while messages keep arriving.

Each scenario runs its own throwaway server (tests/throwaway.py): the shared Redis and
Postgres are never stopped or flushed. Postgres is down for 5 s in the CI variant and 30 s
under NEXUS_RELIABILITY_HEAVY=1.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import create_engine, text

from nexus.db import Database
from nexus.db.migrate import upgrade
from nexus.ledger.enums import Disposition, QueueMode
from tests.fakes.platform_server import FakePlatforms
from tests.integration.processes import fast_beat, nexus_process, telegram_update
from tests.integration.session_support import THREADS, Cluster, cluster, user_texts
from tests.integration.worker_process import celery_worker, wait_for, worker_environment
from tests.reliability.scale import pick
from tests.reliability.watch import InvariantWatch
from tests.support import free_port, port_open
from tests.throwaway import ThrowawayPostgres, ThrowawayRedis, throwaway_postgres, throwaway_redis

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
MESSAGES = pick(60, 300)
UNCAPPED = {"NEXUS_QUEUE_CAP": "10000"}


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[ThrowawayRedis]:
    with throwaway_redis(tmp_path) as server:
        yield server


class Load:
    """Sends `texts` one by one, `interval` apart, on a thread, while the scenario acts."""

    def __init__(self, send: Callable[[str], None], texts: list[str], interval: float) -> None:
        self.sent: list[str] = []
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, args=(send, texts, interval))

    def _run(self, send: Callable[[str], None], texts: list[str], interval: float) -> None:
        for item in texts:
            try:
                send(item)
                self.sent.append(item)
            except Exception as error:  # recorded; the scenario decides what is acceptable
                self.errors.append(f"{item}: {type(error).__name__}: {error}")
            time.sleep(interval)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._thread.join(timeout=300)


def _answered_once_in_arrival_order(nodes: Cluster, count: int) -> None:
    items = sorted(nodes.items(), key=lambda i: (i.enqueued_at, i.id))
    assert len(items) == count
    assert {i.disposition for i in items} == {Disposition.CONSUMED}
    arrival = [str(i.event_id).removeprefix("telegram:") for i in items]
    assert [user_texts(view) for view in nodes.chain()] == [[text] for text in arrival]


class Supervisor:
    """Starts again any worker process that exited, as the deployment's restart policy does
    (compose: `restart: unless-stopped`; Kubernetes restarts the pod). A Celery worker can
    exit on a broker connection lost mid-restore (kombu 5.7: "Unrecoverable error:
    AttributeError ... 'hostname'" while restoring unacked messages): nothing accepted may
    depend on a worker surviving that, so the scenario restarts it and checks the rest."""

    def __init__(self, nodes: Cluster, stack: ExitStack, tmp_path: Path) -> None:
        self._nodes, self._stack, self._tmp_path = nodes, stack, tmp_path
        self.restarted = 0

    def revive(self) -> None:
        for index, process in enumerate(self._nodes.workers):
            if process.poll() is None:
                continue
            self.restarted += 1
            log = self._tmp_path / f"worker{index}-restart{self.restarted}.log"
            self._nodes.logs.append(log)
            self._nodes.workers[index] = self._stack.enter_context(
                celery_worker(
                    self._nodes.environment, log, queues="events,sessions,timer", threads=THREADS
                )
            )

    def settled(self, count: int) -> bool:
        self.revive()
        return self._nodes.settled(count)


def _redis_cluster(
    database: Database, tmp_path: Path, server: ThrowawayRedis
) -> AbstractContextManager[Cluster]:
    return cluster(
        database,
        tmp_path,
        mode=QueueMode.QUEUE,
        workers=2,
        beat=True,  # the relay re-rings whatever the restart or the flush lost
        extra_env={"NEXUS_REDIS_URL": server.url, **UNCAPPED},
    )


def test_a_redis_restart_under_load_loses_nothing(
    watched_db: Database, tmp_path: Path, own_redis: ThrowawayRedis
) -> None:
    texts = [f"r{n:03d}" for n in range(MESSAGES)]
    with _redis_cluster(watched_db, tmp_path, own_redis) as nodes, ExitStack() as stack:
        supervisor = Supervisor(nodes, stack, tmp_path)
        with Load(lambda text: nodes.send([text]), texts, interval=0.05) as load:
            wait_for(lambda: len(load.sent) >= MESSAGES // 3, what="the load to get going")
            own_redis.stop()  # every key gone: queues, leases, signals, doorbells
            time.sleep(2.0)
            own_redis.start()
        # Ingest commits to Postgres first and rings after: a ring that found Redis down
        # is logged, never raised, so every message was accepted.
        assert load.errors == [] and load.sent == texts
        wait_for(lambda: supervisor.settled(MESSAGES), timeout=180, what="every message answered")
        _answered_once_in_arrival_order(nodes, MESSAGES)


def test_flushall_under_load_loses_nothing(
    watched_db: Database, tmp_path: Path, own_redis: ThrowawayRedis
) -> None:
    texts = [f"f{n:03d}" for n in range(MESSAGES)]
    with _redis_cluster(watched_db, tmp_path, own_redis) as nodes, ExitStack() as stack:
        supervisor = Supervisor(nodes, stack, tmp_path)
        with Load(lambda text: nodes.send([text]), texts, interval=0.05) as load:
            for fraction in (3, 2):  # twice, while turns run and messages arrive
                wait_for(lambda f=fraction: len(load.sent) >= MESSAGES // f, what="the load")
                redis.Redis.from_url(own_redis.url).flushall()
        assert load.errors == [] and load.sent == texts
        wait_for(lambda: supervisor.settled(MESSAGES), timeout=180, what="every message answered")
        _answered_once_in_arrival_order(nodes, MESSAGES)


DOWN_S = pick(5.0, 30.0)
SECRET = "reliability-telegram-secret"


@pytest.fixture
def own_postgres() -> Iterator[tuple[ThrowawayPostgres, Database]]:
    """A migrated ledger on a Postgres server of this test's own, which it may stop."""
    with throwaway_postgres() as server:
        admin = create_engine(server.url(), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text('CREATE DATABASE "nexus"'))
        admin.dispose()
        upgrade(server.url("nexus"))
        database = Database(server.url("nexus"))
        try:
            yield server, database
        finally:
            database.close()


def test_postgres_down_under_load_answers_503_and_then_everything(
    own_postgres: tuple[ThrowawayPostgres, Database],
    invariants: InvariantWatch,
    tmp_path: Path,
) -> None:
    server, database = own_postgres
    api_port = free_port()
    with FakePlatforms() as platforms, ExitStack() as stack:
        invariants.watch(database, platforms=platforms)
        environment = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
            **worker_environment(database.url),
            "NEXUS_TELEGRAM_SECRET_TOKEN": SECRET,
            "NEXUS_TELEGRAM_BOT_TOKEN": "123:reliability",
            "NEXUS_TELEGRAM_API_BASE": platforms.base_url,
            "NEXUS_SESSION_LEASE_MS": "2000",
            "NEXUS_DELIVERY_LEASE_MS": "3000",  # a send cut off by the outage lapses soon
            **UNCAPPED,
        }
        stack.enter_context(
            nexus_process(["api", "--port", str(api_port)], tmp_path / "api.log", environment)
        )
        for n in range(2):
            stack.enter_context(
                celery_worker(
                    environment,
                    tmp_path / f"worker{n}.log",
                    queues="events,sessions,delivery,timer",
                    threads=4,
                )
            )
        stack.enter_context(fast_beat(environment, tmp_path / "beat.log"))
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")
        client = stack.enter_context(
            httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=30)
        )
        answers: dict[int, list[int]] = {}

        def post(number: int) -> None:
            update = telegram_update(number, number % 3)
            headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            sent = client.post("/v1/inbound/telegram", json=update, headers=headers)
            answers.setdefault(number, []).append(sent.status_code)
            if sent.status_code == 503:
                assert sent.json()["error"]["type"] == "unavailable"
                assert sent.headers["retry-after"]

        total = int((DOWN_S + 6) * 10)  # ten a second, from before the outage to after it
        with Load(lambda text: post(int(text)), [str(n) for n in range(total)], interval=0.1):
            wait_for(lambda: len(answers) >= 30, what="the load to get going")
            server.stop()
            time.sleep(DOWN_S)
            server.start()
        statuses = {status for codes in answers.values() for status in codes}
        assert statuses == {200, 503}, statuses
        refused = sorted(n for n, codes in answers.items() if codes == [503])
        assert refused, "nothing was sent while Postgres was down"
        # Never a 2xx without a row: every update answered 200 is in the ledger.
        accepted = [n for n, codes in answers.items() if 200 in codes]
        assert set(_stored(database)) >= {f"telegram:{900_000 + n}" for n in accepted}
        for number in refused:  # what Telegram does with a 503: deliver it again
            post(number)
        assert all(answers[n][-1] == 200 for n in refused)
        wait_for(lambda: _all_answered(database, total), timeout=240, what="all answered")
        wait_for(lambda: _replies_sent(database), timeout=120, what="every reply sent")
        assert len(platforms.of("telegram")) >= 3  # a reply per session at least
        invariants.check(database)  # while the throwaway server still runs


def _stored(database: Database) -> list[str]:
    with database.unit_of_work() as uow:
        return list(uow.connection.exec_driver_sql("SELECT id FROM events").scalars())


def _all_answered(database: Database, count: int) -> bool:
    with database.unit_of_work() as uow:
        done = uow.connection.exec_driver_sql(
            "SELECT count(*) FROM queue_items WHERE status = 'done'"
        ).scalar_one()
    return int(done) >= count


def _replies_sent(database: Database) -> bool:
    """Every committed turn's reply recorded, and every recorded chunk settled: sent, or
    failed when a send was under way as Postgres went and its outcome is unknown (the
    default `NEXUS_DELIVERY_UNCERTAIN=fail` never risks a second message)."""
    with database.unit_of_work() as uow:
        unsent, unplanned = uow.connection.exec_driver_sql(
            "SELECT (SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')),"
            " (SELECT count(*) FROM turns t WHERE t.status = 'completed' AND NOT EXISTS "
            "   (SELECT 1 FROM deliveries d WHERE d.turn_id = t.id))"
        ).one()
    return int(unsent) == 0 and int(unplanned) == 0
