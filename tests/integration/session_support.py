"""Helpers for session-runtime tests on real worker processes, Postgres and Redis."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen

from nexus.adapters.celery_broker import CeleryDoorbell, create_celery
from nexus.db import Database
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.enums import QueueMode, QueueStatus, TurnStatus
from nexus.ledger.records import NewSession, QueueItemRecord, TurnView
from nexus.ledger.repository.identity import auto_entity_id
from nexus.settings import Settings
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.processes import fast_beat
from tests.integration.worker_process import celery_worker, worker_environment

MODEL = "claude-sonnet-4-6"
SENDER = "4242"
THREADS = 4  # route the next message while a turn runs, as any real deployment does
LABEL = f"dm:{auto_entity_id('telegram', SENDER)}"


@dataclass
class Cluster:
    database: Database
    environment: dict[str, str]
    doorbell: CeleryDoorbell
    session_id: str
    workers: list[Popen[bytes]]
    logs: list[Path]

    def send(self, texts: list[str], *, concurrency: int = 1) -> None:
        """Webhook-style ingest: one event per text, the doorbell rung after each commit."""

        def one(text: str) -> None:
            event = NexusEvent(
                id=f"telegram:{text}",
                adapter="telegram",
                platform="telegram",
                sender=Author(id=SENDER, display_name="Ada"),
                container=Container(kind="dm", id=SENDER),
                text=text,
                occurred_at=0,
            )
            with self.database.unit_of_work() as uow:
                ingest(uow, [event], self.doorbell)
                uow.commit()

        if concurrency == 1:
            for text in texts:
                one(text)
            return
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(one, texts))

    def items(self) -> list[QueueItemRecord]:
        with self.database.unit_of_work() as uow:
            return uow.ledger.queue.for_session(self.session_id)

    def chain(self) -> list[TurnView]:
        with self.database.unit_of_work() as uow:
            session = uow.ledger.sessions.get(self.session_id)
            assert session is not None
            if session.thread_id is None:
                return []
            return uow.ledger.threads.read_ancestry(session.thread_id)

    def settled(self, count: int) -> bool:
        items = self.items()
        done = [i for i in items if i.status in (QueueStatus.DONE, QueueStatus.DEAD)]
        return len(items) >= count and len(done) == len(items)

    def log_text(self) -> str:
        return "\n".join(path.read_text() for path in self.logs)


def on_fake_model(fake: FakeAnthropicServer) -> dict[str, str]:
    """Worker settings whose model is the loopback fake, through the real SDK."""
    return {
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "NEXUS_MODEL": MODEL,
    }


RUNS = r"nexus\.(?:session\.run|event\.process)"


def running_worker(nodes: Cluster, *, timeout: float = 10) -> Popen[bytes]:
    """The worker in the middle of a session run (one was received and has not ended).
    A ring that finds the session busy ends at once, so wait until only one worker has a
    run under way."""
    deadline = time.monotonic() + timeout
    while True:
        running = []
        for worker, log in zip(nodes.workers, nodes.logs, strict=True):
            text = log.read_text()
            # The router runs an idle session's turn itself, so a run may be under way in
            # either task.
            started = set(re.findall(rf"Task {RUNS}\[([0-9a-f-]+)\] received", text))
            ended = set(re.findall(rf"Task {RUNS}\[([0-9a-f-]+)\] (?:succeeded|raised)", text))
            if started - ended:
                running.append(worker)
        if len(running) == 1:
            return running[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(running)} workers are running the session, not one")
        time.sleep(0.05)


def user_texts(view: TurnView) -> list[str]:
    return [m.content["text"] for m in view.messages if m.role.value == "user"]


def completed(chain: list[TurnView]) -> list[TurnView]:
    return [v for v in chain if v.turn.status == TurnStatus.COMPLETED]


@contextmanager
def cluster(
    database: Database,
    tmp_path: Path,
    *,
    mode: QueueMode,
    workers: int = 1,
    extra_env: dict[str, str] | None = None,
    capabilities: tuple[str, ...] = (),
    worker_app: str = "workers.main",
    beat: bool = False,
) -> Iterator[Cluster]:
    """A session in `mode` for one Telegram sender, and `workers` worker processes.

    `beat`: a beat ticking every second too (the workers then also take the timer queue),
    so the relay re-rings lost doorbells as it does in production, only sooner.
    """
    environment = {
        **worker_environment(database.url),
        "NEXUS_SESSION_LEASE_MS": "2000",
        **(extra_env or {}),
    }
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        if capabilities:
            from nexus.engine.capabilities import CapabilityRegistry

            registry = CapabilityRegistry()
            chosen = [registry.get(c) for c in capabilities]
            uow.ledger.agents.set_capabilities(
                persona.id, [(c.id, c.name, c.description, c.status) for c in chosen]
            )
        session = uow.ledger.sessions.ensure(
            NewSession(label=LABEL, persona_id=persona.id, queue_mode=mode)
        )
        uow.commit()
    settings = Settings(
        database_url=database.url,
        redis_url=environment["NEXUS_REDIS_URL"],
        broker_prefix=environment["NEXUS_BROKER_PREFIX"],
    )
    doorbell = CeleryDoorbell(create_celery(settings))
    queues = "events,sessions,timer" if beat else "events,sessions"
    with ExitStack() as stack:
        logs = [tmp_path / f"worker{n}.log" for n in range(workers)]
        started = [
            stack.enter_context(
                celery_worker(environment, log, queues=queues, threads=THREADS, app=worker_app)
            )
            for log in logs
        ]
        if beat:
            stack.enter_context(fast_beat(environment, tmp_path / "beat.log"))
        yield Cluster(database, environment, doorbell, session.id, started, logs)
