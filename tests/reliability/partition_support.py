"""What the partition scenarios share: process settings whose Redis or Postgres goes through
a `Link` (tests/reliability/links.py), the processes' start-up (`deploy`), a webhook poster,
and what they wait on in the ledger and the workers' logs."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from nexus.db import Database
from nexus.sessions.failures import RETRY_BACKOFF_MS
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.platform_server import FakePlatforms
from tests.integration.processes import fast_beat, nexus_process, telegram_update
from tests.integration.session_support import RUNS
from tests.integration.worker_process import celery_worker, wait_for, worker_environment
from tests.reliability.links import Link
from tests.services import REDIS_URL
from tests.support import free_port, port_open

T = TypeVar("T")
SECRET = "partition-telegram-secret"
LEASE_S = 4.0  # NEXUS_SESSION_LEASE_MS
WATCHDOG_S = 1.0  # NEXUS_WATCHDOG_SECONDS: its period, and the grace for overdue work
# A cut-off process's Redis commands time out after this (`?socket_timeout=` on its URL).
# Production's 5 s against a 30 s lease has the same shape: the turn gives up on Redis
# while its lease is still held (it lapses 2/3 of a TTL after the cut at the earliest), so
# nothing but the watchdog can notice the retry. A claim found without a lease (the turn
# gave up later than that) is the older watchdog rule; both are accepted.
SOCKET_TIMEOUT_S = 0.5
BACKOFF_S = RETRY_BACKOFF_MS[0] / 1000
# Room for the ring, the task and a quick answer on a loaded two-core machine (a worker's
# first model call alone took 3 to 7 s there).
SLACK_S = 10.0
TAKEOVER_S = LEASE_S + 2 * WATCHDOG_S + BACKOFF_S + SOCKET_TIMEOUT_S + SLACK_S


def redis_url_through(link: Link) -> str:
    """REDIS_URL (its database) reached through `link`."""
    parts = urlsplit(REDIS_URL)
    return urlunsplit((parts.scheme, f"127.0.0.1:{link.port}", parts.path, "", ""))


def redis_through(link: Link) -> dict[str, str]:
    """A process's settings for REDIS_URL (its database) reached through `link`: the
    coordination with a short socket timeout, the broker (kombu takes no such query) too."""
    broker = redis_url_through(link)
    return {"NEXUS_REDIS_URL": f"{broker}?socket_timeout={SOCKET_TIMEOUT_S}",
            "NEXUS_BROKER_URL": broker}  # fmt: skip


def redis_target() -> tuple[str, int]:
    parts = urlsplit(REDIS_URL)
    return parts.hostname or "127.0.0.1", parts.port or 6379


def postgres_target(database: Database) -> tuple[str, int]:
    parts = urlsplit(database.url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def postgres_through(link: Link, database: Database) -> dict[str, str]:
    """A process's NEXUS_DATABASE_URL for `database` (its user and password kept), reached
    through `link`."""
    parts = urlsplit(database.url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{link.port}" if credentials else f"127.0.0.1:{link.port}"
    return {"NEXUS_DATABASE_URL": urlunsplit(parts._replace(netloc=netloc))}


def base_environment(database: Database, platforms: FakePlatforms) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))},
        **worker_environment(database.url),
        "NEXUS_TELEGRAM_SECRET_TOKEN": SECRET,
        "NEXUS_TELEGRAM_BOT_TOKEN": "123:partition",
        "NEXUS_TELEGRAM_API_BASE": platforms.base_url,
        "NEXUS_SESSION_LEASE_MS": str(int(LEASE_S * 1000)),
        "NEXUS_WATCHDOG_SECONDS": str(WATCHDOG_S),
        "NEXUS_DELIVERY_LEASE_MS": "3000",
        "NEXUS_QUEUE_CAP": "10000",
        "NEXUS_LOG_LEVEL": os.environ.get("PARTITION_LOG_LEVEL", "INFO"),
    }


class Poster:
    """Telegram updates through the API, each answer's status kept by update number."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.answers: dict[int, list[int]] = {}
        self.slowest_s = 0.0

    def post(self, number: int, sender: int) -> int:
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        started = time.monotonic()
        try:
            sent = self.client.post(
                "/v1/inbound/telegram", json=telegram_update(number, sender), headers=headers
            )
            status = sent.status_code
        except httpx.TimeoutException:
            status = 0  # no answer at all: neither accepted nor refused
        self.slowest_s = max(self.slowest_s, time.monotonic() - started)
        self.answers.setdefault(number, []).append(status)
        return status


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def settled(database: Database, count: int) -> bool:
    """`count` inputs queued, each with a disposition (the replies, with the checker)."""
    with database.unit_of_work() as uow:
        total, open_ = uow.connection.exec_driver_sql(
            "SELECT count(*), count(*) FILTER (WHERE status IN ('queued', 'claimed'))"
            " FROM queue_items"
        ).one()
    return int(total) >= count and int(open_) == 0


def epoch(database: Database) -> int:
    """The highest session epoch: every claim of a session raises its epoch."""
    with database.unit_of_work() as uow:
        found = uow.connection.exec_driver_sql("SELECT max(epoch) FROM sessions").scalar_one()
    return int(found or 0)


def replies_sent(database: Database) -> bool:
    with database.unit_of_work() as uow:
        unsent = uow.connection.exec_driver_sql(
            "SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')"
        ).scalar_one()
    return int(unsent) == 0


def lost_attempts(database: Database) -> list[str]:
    with database.unit_of_work() as uow:
        kinds = uow.connection.exec_driver_sql(
            "SELECT error_kind FROM turns WHERE status = 'failed' ORDER BY started_at"
        ).scalars()
    return [str(kind) for kind in kinds]


def running(logs: list[Path]) -> int:
    """The index of the one worker with a session run under way (see `running_worker`)."""
    deadline = time.monotonic() + 10
    while True:
        under_way = []
        for index, log in enumerate(logs):
            text = log.read_text()
            started = set(re.findall(rf"Task {RUNS}\[([0-9a-f-]+)\] received", text))
            ended = set(re.findall(rf"Task {RUNS}\[([0-9a-f-]+)\] (?:succeeded|raised)", text))
            if started - ended:
                under_way.append(index)
        if len(under_way) == 1:
            return under_way[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(under_way)} workers are running the session, not one")
        time.sleep(0.05)


def enter_together(stack: ExitStack, managers: Sequence[AbstractContextManager[T]]) -> list[T]:
    """Enter `managers` side by side, each in a thread (processes that start in parallel:
    on a small machine a Celery worker takes seconds to be ready); `stack` exits them."""
    entered: list[tuple[T] | BaseException | None] = [None] * len(managers)

    def enter(index: int) -> None:
        try:
            entered[index] = (managers[index].__enter__(),)
        except BaseException as error:  # raised below, in the caller
            entered[index] = error

    threads = [threading.Thread(target=enter, args=(n,)) for n in range(len(managers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    values: list[T] = []
    for manager, result in zip(managers, entered, strict=True):
        if isinstance(result, tuple):
            stack.push(manager)
            values.append(result[0])
    for result in entered:
        if not isinstance(result, tuple):
            raise RuntimeError("a process did not start") from result
    return values


@dataclass
class Deployment:
    """A scenario's processes, which `stack` stops: `nexus api` and a client of it, a beat
    (if one was asked for), and the Celery workers, each with its settings and its log."""

    stack: ExitStack
    tmp_path: Path
    queues: str
    api: Popen[bytes]
    client: httpx.Client
    beat: Popen[bytes] | None
    beat_log: Path
    environments: list[dict[str, str]]
    workers: list[Popen[bytes]]
    logs: list[Path]

    def restart(self, n: int) -> None:
        """Start worker `n` again on its settings, as a deployment's restart policy would,
        with a log of its own."""
        self.logs[n] = self.tmp_path / f"worker{n}-restarted.log"
        self.workers[n] = self.stack.enter_context(
            celery_worker(self.environments[n], self.logs[n], queues=self.queues, threads=4)
        )


def deploy(
    stack: ExitStack,
    tmp_path: Path,
    api: dict[str, str],
    workers: Sequence[dict[str, str]],
    *,
    queues: str,
    beat: dict[str, str] | None = None,
    client_timeout: float = 30,
) -> Deployment:
    """`nexus api` on the settings `api`, a fast beat on `beat` if given, and a worker (four
    threads, consuming `queues`) on each of `workers`, started side by side; returned once
    every worker is ready and the API listens. Logs go to `tmp_path`."""
    api_port = free_port()
    api_process = stack.enter_context(
        nexus_process(["api", "--port", str(api_port)], tmp_path / "api.log", api)
    )
    beat_log = tmp_path / "beat.log"
    beat_process = stack.enter_context(fast_beat(beat, beat_log)) if beat is not None else None
    environments = list(workers)
    logs = [tmp_path / f"worker{n}.log" for n in range(len(environments))]
    started = enter_together(
        stack,
        [
            # timeout: side by side on a loaded machine
            celery_worker(environment, log, queues=queues, threads=4, timeout=120)
            for environment, log in zip(environments, logs, strict=True)
        ],
    )
    wait_for(lambda: port_open(api_port), timeout=60, what="the API")
    client = stack.enter_context(
        httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=client_timeout)
    )
    return Deployment(
        stack=stack,
        tmp_path=tmp_path,
        queues=queues,
        api=api_process,
        client=client,
        beat=beat_process,
        beat_log=beat_log,
        environments=environments,
        workers=started,
        logs=logs,
    )


def cut_mid_turn(
    database: Database,
    fake: FakeAnthropicServer,
    poster: Poster,
    deployment: Deployment,
    links: Sequence[Link],
    *,
    timeout: float,
    reset: bool = False,
) -> tuple[int, float, float]:
    """Post update 1 and, once its turn's (slow) answer has started, cut the link of the
    worker running it (`reset`: resetting its connections); wait up to `timeout` for the
    other worker's claim, then for the answer. The cut-off worker's index, the time of the
    cut, and how long after it the claim came."""
    assert poster.post(1, sender=1) == 200
    wait_for(lambda: len(fake.requests) == 1, what="the slow turn to start")
    cut_off = running(deployment.logs)
    claimed_at_cut = epoch(database)
    links[cut_off].cut(reset=reset)
    cut_at = time.monotonic()
    wait_for(
        lambda: epoch(database) > claimed_at_cut, timeout=timeout, what="the other worker's claim"
    )
    took = time.monotonic() - cut_at
    wait_for(lambda: settled(database, 1), timeout=60, what="the taken-over answer")
    return cut_off, cut_at, took
