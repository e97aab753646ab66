"""The two systems under test, each as real processes on its own database and Redis prefix:
Nexus (`nexus api` + `nexus worker`) and the bare Celery sketch (`bench.bare_app`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from celery import Celery

from bench import harness
from bench.harness import Process
from bench.ledger import _session
from nexus.arrival.messages import send_to_session
from nexus.arrival.settings import QueuePolicy
from nexus.db import Database
from nexus.doorbell import DeferredDoorbell
from nexus.ledger.enums import QueueMode
from nexus.settings import Settings

# Nexus's worker defaults on this machine (prefork, one process per core); both sides get it.
CONCURRENCY = 2


@dataclass
class NexusStack:
    url: str
    prefix: str
    env: dict[str, str]
    api_url: str | None
    api: Process | None
    workers: list[Process] = field(default_factory=list)

    @property
    def measured(self) -> list[Process]:
        """The processes whose CPU counts: the API (if any) and every worker."""
        return [*([self.api] if self.api else []), *self.workers]


@dataclass
class FloorStack:
    api_url: str
    stream: str  # sender 0's session stream, where each commit is announced
    headers: dict[str, str]


@dataclass
class BareStack:
    url: str
    prefix: str
    client: Celery
    workers: list[Process]


@contextmanager
def nexus_stack(
    work: Path,
    *,
    workers: int = 1,
    concurrency: int = CONCURRENCY,
    queues: str = "events,sessions",
    api: bool = True,
    url: str | None = None,
    prepare: Callable[[str], object] | None = None,
    **settings: str,
) -> Iterator[NexusStack]:
    """`nexus api` and `workers` × `nexus worker -c concurrency`, ready when the block starts.

    The delivery queue is not consumed (unless `queues` names it): a committed reply still
    records its deliveries and rings for them, but nothing is sent, as the bare sketch sends
    nothing either. `prepare(url)` runs before any process starts (say, to fill queues)."""
    with ExitStack() as stack:
        prefix = stack.enter_context(harness.redis_prefix())
        url = url or stack.enter_context(harness.database())
        if prepare is not None:
            prepare(url)
        env = harness.nexus_environment(url, prefix, work, **settings)
        started = stack.enter_context(harness.processes())
        api_process, api_url = None, None
        if api:
            port = harness.free_port()
            api_process = harness.nexus_api(env, work / "api.log", port)
            started.append(api_process)
            api_url = f"http://127.0.0.1:{port}"
        for number in range(workers):
            log = work / f"nexus-worker{number + 1}.log"
            started.append(harness.nexus_worker(env, log, concurrency=concurrency, queues=queues))
        stack_ = NexusStack(url, prefix, env, api_url, api_process, started[1 if api else 0 :])
        if api:
            harness.wait_for(lambda: harness.port_open(port), timeout=60, what="the API")
        for process in stack_.workers:
            process.wait_log(b"ready.")
        yield stack_


@contextmanager
def bare_stack(work: Path, *, senders: int, concurrency: int = CONCURRENCY) -> Iterator[BareStack]:
    """The bare sketch's worker (same pool, concurrency and flags as Nexus's) and a client
    app to publish with; `senders` sessions `bare:{n}` exist before it starts."""
    with ExitStack() as stack:
        prefix = stack.enter_context(harness.redis_prefix())
        url = stack.enter_context(harness.database())
        database = Database(url)
        try:
            for sender in range(senders):
                _session(database, f"bare:{sender}")
        finally:
            database.dispose()
        env = harness.nexus_environment(url, prefix, work)
        started = stack.enter_context(harness.processes())
        args = [sys.executable, "-m", "celery", "-A", "bench.bare_app", "worker", "-E"]
        args += ["-Q", "events,sessions", "-c", str(concurrency), *harness.WORKER_FLAGS]
        args += ["-n", "bare@%h"]
        worker = Process(args, env, work / "bare-worker.log")
        started.append(worker)
        worker.wait_log(b"ready.")
        from bench.bare_app import create_bare

        client = create_bare(
            Settings(
                database_url=harness.process_database_url(url),
                redis_url=harness.process_redis_url(),  # it stands in for the webhook
                broker_prefix=prefix,
            )
        )
        try:
            yield BareStack(url, prefix, client, [worker])
        finally:
            client.close()


@contextmanager
def floor_stack(work: Path, *, concurrency: int = CONCURRENCY) -> Iterator[FloorStack]:
    """The latency floor (`bench/floor_app.py`): its API under uvicorn and its worker with
    Nexus's Celery settings and flags, on a database and Redis prefix of its own."""
    from bench import floor_app

    with ExitStack() as stack:
        prefix = stack.enter_context(harness.redis_prefix())
        url = stack.enter_context(harness.database())
        [session_id] = floor_app.prepare(url, senders=1)
        env = harness.nexus_environment(url, prefix, work)
        started = stack.enter_context(harness.processes())
        port = harness.free_port()
        api = [sys.executable, "-m", "uvicorn", "bench.floor_app:api", "--port", str(port)]
        started.append(Process([*api, "--log-level", "warning"], env, work / "floor-api.log"))
        args = [sys.executable, "-m", "celery", "-A", "bench.floor_app", "worker", "-E"]
        args += ["-Q", "events", "-c", str(concurrency), *harness.WORKER_FLAGS, "-n", "floor@%h"]
        worker = Process(args, env, work / "floor-worker.log")
        started.append(worker)
        worker.wait_log(b"ready.")
        harness.wait_for(lambda: harness.port_open(port), timeout=60, what="the floor's API")
        yield FloorStack(
            f"http://127.0.0.1:{port}",
            floor_app.stream_key(prefix, session_id),
            harness.TELEGRAM_HEADERS,
        )


def fill_queues(url: str, *, sessions: int, per_session: int) -> None:
    """`per_session` messages queued for each of `sessions` sessions, in `queue` mode (one
    turn per message), as `POST /v1/sessions/{label}/messages` would queue them. Nothing is
    rung: a worker's relay on start rings every session with work."""
    database = Database(url)
    policy = QueuePolicy(cap=per_session + 1)
    try:
        for session in range(sessions):
            with database.unit_of_work() as uow:
                for number in range(per_session):
                    send_to_session(
                        uow,
                        f"bench-{session}",
                        f"message {number}",
                        DeferredDoorbell(),
                        mode=QueueMode.QUEUE,
                        queueing=policy,
                    )
                uow.commit()
    finally:
        database.dispose()
