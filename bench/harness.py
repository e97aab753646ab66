"""What every benchmark shares: processes with their CPU and RSS, a fresh database, a Redis
key prefix of our own, readiness waits, and the machine's description."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from bench.ledger import DEFAULT_ADMIN_URL, postgres_database

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).with_name("results")
NEXUS = Path(sys.prefix) / "bin" / "nexus"
ADMIN_URL = os.environ.get("NEXUS_BENCH_POSTGRES_URL", DEFAULT_ADMIN_URL)
# Our own Redis database number and, within it, our own key prefix per run: the Redis is
# shared, and only keys under our prefix are ever deleted.
REDIS_URL = os.environ.get("NEXUS_BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
TELEGRAM_SECRET = "bench-telegram-secret"
TELEGRAM_HEADERS = {"X-Telegram-Bot-Api-Secret-Token": TELEGRAM_SECRET}
# Where the processes under test reach Postgres and Redis: straight, or through delaying
# proxies (`distance`). The benchmark's own observers always go straight.
_ROUTE: dict[str, int] = {}


class Process:
    """A child process with its log; CPU seconds and RSS include its own children (a
    prefork worker's pool processes)."""

    def __init__(self, args: Sequence[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.popen = subprocess.Popen(
            list(args), cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT
        )
        self.ps = psutil.Process(self.popen.pid)

    def _tree(self) -> list[Any]:
        try:
            return [self.ps, *self.ps.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def cpu_s(self) -> float:
        total = 0.0
        for process in self._tree():
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def rss_bytes(self) -> int:
        total = 0
        for process in self._tree():
            try:
                total += int(process.memory_info().rss)
            except psutil.NoSuchProcess:
                continue
        return total

    def wait_log(self, marker: bytes, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.log.read_bytes():
            if self.popen.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{self.log.name}: no {marker!r} in the log:\n{tail}")
            time.sleep(0.1)

    def stop(self, timeout: float = 20) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)
        self._out.close()


@contextmanager
def processes() -> Iterator[list[Process]]:
    """Every process appended to the list is stopped on the way out, last first."""
    started: list[Process] = []
    try:
        yield started
    finally:
        for process in started:  # all asked at once: warm shutdowns overlap
            if process.popen.poll() is None:
                process.popen.terminate()
        deadline = time.monotonic() + 30
        for process in reversed(started):
            process.stop(timeout=max(1.0, deadline - time.monotonic()))


def cpu_of(group: Sequence[Process]) -> float:
    return sum(p.cpu_s() for p in group)


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, every=0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def port_open(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def redis_prefix() -> Iterator[str]:
    """A key prefix of our own; its keys are deleted afterwards (never anyone else's)."""
    prefix = f"nexus-bench-{uuid.uuid4().hex[:8]}:"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()


@contextmanager
def database() -> Iterator[str]:
    """A fresh, migrated Postgres database of our own, dropped afterwards."""
    with postgres_database(ADMIN_URL) as url:
        yield url


@contextmanager
def scratch(name: str) -> Iterator[Path]:
    """A directory for logs (kept in bench/results/logs/<name> when NEXUS_BENCH_KEEP_LOGS)."""
    if os.environ.get("NEXUS_BENCH_KEEP_LOGS"):
        where = RESULTS / "logs" / name
        where.mkdir(parents=True, exist_ok=True)
        yield where
        return
    with tempfile.TemporaryDirectory(prefix=f"nexus-bench-{name}-") as directory:
        yield Path(directory)


def process_database_url(url: str) -> str:
    """`url` as the processes under test reach it: through the proxy within `distance`."""
    if "postgres" not in _ROUTE:
        return url
    from sqlalchemy.engine import make_url

    moved = make_url(url).set(host="127.0.0.1", port=_ROUTE["postgres"])
    return moved.render_as_string(hide_password=False)


def process_redis_url() -> str:
    """The Redis URL the processes under test use: through the proxy within `distance`."""
    if "redis" not in _ROUTE:
        return REDIS_URL
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(REDIS_URL)
    return urlunsplit(parts._replace(netloc=f"127.0.0.1:{_ROUTE['redis']}"))


@contextmanager
def distance(rtt_ms: float) -> Iterator[dict[str, float]]:
    """Within the block, every process started (Nexus's, the sketch's, the floor's, and the
    sketch's publishing client) reaches Postgres and Redis through a proxy adding `rtt_ms`
    per round trip, half each way. Yields the round trip measured through the proxy (a
    Redis PING, median of 200) beside the direct one."""
    from sqlalchemy.engine import make_url

    from bench.wire import proxy

    admin = make_url(ADMIN_URL)
    redis_target = redis.Redis.from_url(REDIS_URL).connection_pool.connection_kwargs
    pg = (admin.host or "127.0.0.1", admin.port or 5432)
    rd = (str(redis_target.get("host", "127.0.0.1")), int(redis_target.get("port", 6379)))
    with proxy(pg, rtt_ms=rtt_ms) as pg_port, proxy(rd, rtt_ms=rtt_ms) as redis_port:
        _ROUTE.update(postgres=pg_port, redis=redis_port)
        try:
            yield {
                "rtt_ms": rtt_ms,
                "redis_ping_direct_ms": _ping_ms(REDIS_URL),
                "redis_ping_proxied_ms": _ping_ms(process_redis_url()),
            }
        finally:
            _ROUTE.clear()


def _ping_ms(url: str, count: int = 200) -> float:
    import statistics

    client = redis.Redis.from_url(url)
    client.ping()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        client.ping()
        samples.append((time.perf_counter() - started) * 1000)
    client.close()
    return statistics.median(samples)


def nexus_environment(database_url: str, prefix: str, work: Path, **extra: str) -> dict[str, str]:
    """A Nexus deployment of our own: its database, its Redis prefix, no hooks, the offline
    scripted model, Telegram webhooks signed with a known secret token (through the
    delaying proxies within `distance`)."""
    hooks = work / "hooks"
    hooks.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NEXUS_", "ANTHROPIC_"))}
    return {
        **base,
        "NEXUS_DATABASE_URL": process_database_url(database_url),
        "NEXUS_REDIS_URL": process_redis_url(),
        "NEXUS_BROKER_PREFIX": prefix,
        "NEXUS_HOOKS_DIR": str(hooks),
        "NEXUS_MODEL": "scripted",
        "NEXUS_TELEGRAM_SECRET_TOKEN": TELEGRAM_SECRET,
        "NEXUS_LOG_LEVEL": "INFO",
        **{f"NEXUS_{key.upper()}": value for key, value in extra.items()},
    }


# The worker flags both sides get alike: prefork, prefetch 1 and acks_late come from the
# app's configuration; no gossip/mingle so start-up is quick and no broadcast traffic runs.
WORKER_FLAGS = ("--without-gossip", "--without-mingle", "--loglevel", "INFO")


def nexus_worker(env: dict[str, str], log: Path, *, concurrency: int, queues: str) -> Process:
    args = [str(NEXUS), "worker", "-Q", queues, "-c", str(concurrency), *WORKER_FLAGS]
    args += ["-n", f"{log.stem}@%h"]
    return Process(args, env, log)


def nexus_api(env: dict[str, str], log: Path, port: int) -> Process:
    return Process([str(NEXUS), "api", "--port", str(port)], env, log)


def poller(database_url: str) -> Engine:
    return create_engine(database_url, pool_size=1, max_overflow=0)


def scalar(engine: Engine, sql: str, **params: object) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text(sql), params).scalar_one())


def telegram_update(number: int, sender: int) -> dict[str, object]:
    """A private-chat Telegram message; `number` must be unique in the database."""
    user = {"id": 7000 + sender, "is_bot": False, "first_name": f"Person {sender}"}
    return {
        "update_id": number,
        "message": {
            "message_id": number,
            "from": user,
            "chat": {"id": 7000 + sender, "type": "private", "first_name": user["first_name"]},
            "date": 1_767_225_600 + number % 1_000_000,
            "text": f"message {number} from {sender}",
        },
    }


def machine() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    packages = ["nexus-broker", "celery", "redis", "SQLAlchemy", "psycopg", "fastapi"]
    packages += ["uvicorn", "langgraph-checkpoint-postgres", "psycopg", "psutil"]
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {name: version(name) for name in packages},
    }
