"""Processes that keep running while their link to Redis is cut (tests/reliability/links.py).

Every process here is real (`nexus api`, Celery workers) on the shared Postgres and Redis;
each worker's (or the API's) Redis connections go through a `Link` of its own, which the
scenario cuts like a dead switch while the process still reaches Postgres.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from subprocess import Popen
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from nexus.db import Database
from nexus.sessions.failures import RETRY_BACKOFF_MS
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.platform_server import FakePlatforms
from tests.integration.processes import fast_beat, nexus_process, telegram_update
from tests.integration.session_support import RUNS, on_fake_model
from tests.integration.worker_process import celery_worker, stop, wait_for, worker_environment
from tests.reliability.links import Link
from tests.reliability.scale import pick
from tests.reliability.watch import InvariantWatch
from tests.services import REDIS_URL
from tests.support import free_port, port_open

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
SECRET = "partition-telegram-secret"
LEASE_S = 4.0  # NEXUS_SESSION_LEASE_MS
WATCHDOG_S = 1.0  # NEXUS_WATCHDOG_SECONDS: its period, and the grace for overdue work
# A cut-off process's Redis commands time out after this (`?socket_timeout=` on its URL).
# Production's 5 s against a 30 s lease has the same shape: the turn gives up on Redis
# while its lease is still held (it lapses 2/3 of a TTL after the cut at the earliest), so
# nothing but the watchdog can notice the retry. A claim found without a lease (the turn
# gave up later than that) is the older watchdog rule; both are accepted below.
SOCKET_TIMEOUT_S = 0.5
BACKOFF_S = RETRY_BACKOFF_MS[0] / 1000
# Room for the ring, the task and a quick answer on a loaded two-core machine (a worker's
# first model call alone took 3 to 7 s there).
SLACK_S = 10.0
TAKEOVER_S = LEASE_S + 2 * WATCHDOG_S + BACKOFF_S + SOCKET_TIMEOUT_S + SLACK_S
CUT_S = pick(3.0, 30.0)  # how long the API's link stays cut
API_MESSAGES = pick(40, 300)


def _through(link: Link) -> dict[str, str]:
    """A process's settings for REDIS_URL (its database) reached through `link`: the
    coordination with a short socket timeout, the broker (kombu takes no such query) too."""
    parts = urlsplit(REDIS_URL)
    netloc = f"127.0.0.1:{link.port}"
    broker = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return {"NEXUS_REDIS_URL": f"{broker}?socket_timeout={SOCKET_TIMEOUT_S}",
            "NEXUS_BROKER_URL": broker}  # fmt: skip


def _redis_target() -> tuple[str, int]:
    parts = urlsplit(REDIS_URL)
    return parts.hostname or "127.0.0.1", parts.port or 6379


def _environment(database: Database, platforms: FakePlatforms) -> dict[str, str]:
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


def _settled(database: Database, count: int) -> bool:
    """`count` inputs queued, each with a disposition (the replies, with the checker)."""
    with database.unit_of_work() as uow:
        total, open_ = uow.connection.exec_driver_sql(
            "SELECT count(*), count(*) FILTER (WHERE status IN ('queued', 'claimed'))"
            " FROM queue_items"
        ).one()
    return int(total) >= count and int(open_) == 0


def _replies_sent(database: Database) -> bool:
    with database.unit_of_work() as uow:
        unsent = uow.connection.exec_driver_sql(
            "SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')"
        ).scalar_one()
    return int(unsent) == 0


def _lost_attempts(database: Database) -> list[str]:
    with database.unit_of_work() as uow:
        kinds = uow.connection.exec_driver_sql(
            "SELECT error_kind FROM turns WHERE status = 'failed' ORDER BY started_at"
        ).scalars()
    return [str(kind) for kind in kinds]


def _running(logs: list[Path]) -> int:
    """The index of the one worker with a session run under way (see `running_worker`)."""
    deadline = time.monotonic() + 10
    while True:
        running = []
        for index, log in enumerate(logs):
            text = log.read_text()
            started = set(re.findall(rf"Task {RUNS}\[([0-9a-f-]+)\] received", text))
            ended = set(re.findall(rf"Task {RUNS}\[([0-9a-f-]+)\] (?:succeeded|raised)", text))
            if started - ended:
                running.append(index)
        if len(running) == 1:
            return running[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(running)} workers are running the session, not one")
        time.sleep(0.05)


@pytest.mark.parametrize("reset", [False, True], ids=["dead-switch", "reset"])
def test_a_worker_cut_from_redis_mid_turn_is_taken_over_without_beat(
    reset: bool,
    pg_database: Database,
    invariants: InvariantWatch,
    fake: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    """The cut-off worker's turn times out on Redis and puts its input back with a backoff;
    it can neither ring for the retry nor release its lease. With no beat running, the
    other worker's watchdog must find the overdue input once the lease lapses, and answer
    it; the lost attempt is on record; after the heal the cut-off worker works again.
    `reset`: the link resets its connections rather than going silent."""
    fake.reply_text("a long answer the cut interrupts " * 10, chunks=80, delay_s=0.25)  # ~20 s
    fake.reply_text("the answer after the cut")
    for n in range(5):
        fake.reply_text(f"answer {n} after the heal")
    api_port = free_port()
    database = pg_database
    with (
        FakePlatforms() as platforms,
        Link(_redis_target()) as link_0,
        Link(_redis_target()) as link_1,
        ExitStack() as stack,
    ):
        invariants.watch(database, platforms=platforms)
        environment = {**_environment(database, platforms), **on_fake_model(fake)}
        stack.enter_context(
            nexus_process(["api", "--port", str(api_port)], tmp_path / "api.log", environment)
        )
        links = [link_0, link_1]
        logs = [tmp_path / f"worker{n}.log" for n in range(2)]
        workers: list[Popen[bytes]] = [
            stack.enter_context(
                celery_worker(
                    {**environment, **_through(link)},
                    log,
                    queues="events,sessions,delivery",  # no timer: no beat, no relay
                    threads=4,
                )
            )
            for link, log in zip(links, logs, strict=True)
        ]
        wait_for(lambda: port_open(api_port), timeout=60, what="the API")
        client = stack.enter_context(
            httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=30)
        )
        poster = Poster(client)
        assert poster.post(1, sender=1) == 200
        wait_for(lambda: len(fake.requests) == 1, what="the slow turn to start")
        cut_off = _running(logs)
        links[cut_off].cut(reset=reset)
        cut_at = time.monotonic()
        wait_for(
            lambda: _settled(database, 1), timeout=TAKEOVER_S + 30, what="the taken-over answer"
        )
        took = time.monotonic() - cut_at
        print(f"\nanswered {took:.1f} s after the cut (bound {TAKEOVER_S:.1f} s)")
        assert took <= TAKEOVER_S
        # The lost attempt is on record once: by the cut-off run (it put its input back)
        # or by the taker-over (it reclaimed the claim), never both.
        assert len(_lost_attempts(database)) == 1
        assert _lost_attempts(database)[0] in ("turn_crashed", "worker_lost")
        assert links[1 - cut_off].connections > 0 and not links[1 - cut_off].is_cut

        links[cut_off].heal()
        if workers[cut_off].poll() is not None:
            # Reset connections can end the Celery worker itself (kombu 5.7: "Unrecoverable
            # error: AttributeError ... 'hostname'" while acking over a lost connection), as
            # test_services.py's Supervisor knows; the restart policy starts it again.
            assert reset and "'hostname'" in logs[cut_off].read_text()
            logs[cut_off] = tmp_path / f"worker{cut_off}-restarted.log"
            workers[cut_off] = stack.enter_context(
                celery_worker(
                    {**environment, **_through(links[cut_off])},
                    logs[cut_off],
                    queues="events,sessions,delivery",
                    threads=4,
                )
            )
            print("the cut-off worker exited on the reset and was started again")
        healed_at = len(logs[cut_off].read_bytes())
        for number, sender in ((2, 1), (3, 2), (4, 3), (5, 4)):
            assert poster.post(number, sender=sender) == 200
        wait_for(lambda: _settled(database, 5), timeout=60, what="the messages after the heal")
        wait_for(lambda: _replies_sent(database), timeout=60, what="every reply sent")
        assert workers[cut_off].poll() is None, logs[cut_off].read_text()[-3000:]
        # The cut-off worker alone now: it answers what comes (once its broker connection
        # is back; a reset one reconnects with a backoff).
        stop(workers[1 - cut_off])
        assert poster.post(6, sender=5) == 200
        wait_for(lambda: _settled(database, 6), timeout=60, what="the cut-off worker's answer")
        wait_for(lambda: _replies_sent(database), timeout=60, what="its reply sent")
        after = logs[cut_off].read_bytes()[healed_at:].count(b"] succeeded in")
        print(f"the cut-off worker ran {after} tasks after the heal")
        assert after >= 2  # the message's routing (with its turn) and its reply at least
        replies = [str(m.body.get("text")) for m in platforms.of("telegram")]
        assert "the answer after the cut" in replies
        assert not any(r.startswith("a long answer the cut interrupts") for r in replies)
        invariants.check(database)


def test_the_api_cut_from_redis_answers_2xx_or_503_and_loses_nothing_accepted(
    pg_database: Database,
    invariants: InvariantWatch,
    tmp_path: Path,
) -> None:
    """Webhooks keep arriving while the API's link to Redis is cut: each is accepted (2xx,
    stored) or refused (503, for the platform to send again); every accepted one is
    answered once the link heals."""
    api_port = free_port()
    database = pg_database
    with FakePlatforms() as platforms, Link(_redis_target()) as link, ExitStack() as stack:
        invariants.watch(database, platforms=platforms)
        environment = _environment(database, platforms)
        api_environment = {**environment, **_through(link)}
        stack.enter_context(
            nexus_process(["api", "--port", str(api_port)], tmp_path / "api.log", api_environment)
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
            httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=15)
        )
        poster = Poster(client)
        before = API_MESSAGES // 4
        for number in range(before):
            assert poster.post(number, sender=number % 3) == 200
        link.cut()
        cut_until = time.monotonic() + CUT_S
        number = before
        while time.monotonic() < cut_until or number < before * 2:
            poster.post(number, sender=number % 3)
            number += 1
        link.heal()
        during, slowest_s = number - before, poster.slowest_s
        while number < API_MESSAGES:
            poster.post(number, sender=number % 3)
            number += 1
        statuses = {status for codes in poster.answers.values() for status in codes}
        print(
            f"\n{during} webhooks while the API's Redis link was cut: statuses "
            f"{sorted(statuses)}, the slowest answer {slowest_s:.2f} s"
        )
        assert statuses <= {200, 503}, poster.answers
        for refused in [n for n, codes in poster.answers.items() if codes[-1] != 200]:
            assert poster.post(refused, sender=refused % 3) == 200  # the platform's retry
        wait_for(lambda: _settled(database, API_MESSAGES), timeout=120, what="every input answered")
        wait_for(lambda: _replies_sent(database), timeout=60, what="every reply sent")
        invariants.check(database)
