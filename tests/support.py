"""Test helpers: a controllable clock and builders for turn drafts."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from nexus.access.policy import Policy
from nexus.arrival.service import ArrivalSignals
from nexus.arrival.settings import SHIPPED_QUEUE_POLICY, QueuePolicy
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell, RecordingDoorbell
from nexus.hooks.loader import load_hooks
from nexus.hooks.pool import HookPool
from nexus.hooks.service import HookRunner
from nexus.ids import new_id
from nexus.ingest.batch import ProcessedEvent, route_waiting
from nexus.ledger.enums import CompactionTrigger, MessageRole, TurnStatus, TurnType
from nexus.ledger.records import (
    CompactionDraft,
    ConsumedItem,
    MessageDraft,
    NewSession,
    SessionRecord,
    TokenUsage,
    TurnDraft,
)
from nexus.ledger.repository import Ledger

if TYPE_CHECKING:
    from pathlib import Path

    from nexus.adapters.redis_coordination import RedisCoordination
    from nexus.bootstrap import Nexus
    from nexus.db import Database
    from nexus.sessions.runner import SessionRunner


@dataclass
class FakeClock:
    """Unix-ms time that moves only when a test says so."""

    now: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def text_turn(
    session: SessionRecord,
    parent: str | None,
    question: str,
    answer: str | None = None,
    *,
    consumed: tuple[ConsumedItem, ...] = (),
    status: TurnStatus = TurnStatus.COMPLETED,
    tokens: int = 10,
) -> TurnDraft:
    """A plain user → assistant turn onto `parent`."""
    return TurnDraft(
        id=new_id(),
        session_id=session.id,
        parent_turn_id=parent,
        status=status,
        started_at=0,
        usage=TokenUsage(input_tokens=tokens),
        model="scripted",
        messages=(
            MessageDraft(role=MessageRole.USER, content={"text": question}),
            MessageDraft(role=MessageRole.ASSISTANT, content={"text": answer or f"re: {question}"}),
        ),
        consumed=consumed,
    )


def compaction_turn(
    session: SessionRecord,
    parent: str,
    summary: str,
    *,
    first_kept: str | None,
    summarized_through: str | None,
    turns_summarized: int,
) -> TurnDraft:
    return TurnDraft(
        id=new_id(),
        session_id=session.id,
        parent_turn_id=parent,
        turn_type=TurnType.COMPACTION,
        started_at=0,
        messages=(MessageDraft(role=MessageRole.SYSTEM, content={"text": summary}),),
        compaction=CompactionDraft(
            summary=summary,
            summarized_through_turn_id=summarized_through,
            first_kept_turn_id=first_kept,
            turns_summarized=turns_summarized,
            trigger=CompactionTrigger.PROACTIVE,
        ),
    )


def new_session(ledger: Ledger, label: str = "main", persona: str = "atlas") -> SessionRecord:
    agent = ledger.agents.ensure(persona)
    return ledger.sessions.create(NewSession(label=label, persona_id=agent.id))


def build_chain(
    ledger: Ledger,
    session: SessionRecord,
    count: int,
    *,
    compact_every: int | None = None,
    keep: int = 5,
) -> list[str]:
    """Commit `count` turns onto the session's head; returns the chain's turn ids in order.

    With `compact_every`, every turn whose depth is a multiple of it is a compaction turn
    that keeps the last `keep` normal turns; so heads at depths 100 and 10,000 sit at the
    same place relative to their latest compaction.
    """
    epoch = ledger.sessions.claim(session.id)
    current = ledger.sessions.get(session.id)
    assert current is not None
    head = current.thread_id
    chain: list[str] = []
    normal: list[str] = []
    depth = current_depth(ledger, head)
    for index in range(count):
        depth += 1
        if compact_every and depth % compact_every == 0 and head is not None:
            kept = normal[-keep:] if keep else []
            draft = compaction_turn(
                session,
                head,
                f"summary through turn {len(normal)}",
                first_kept=kept[0] if kept else None,
                summarized_through=normal[-keep - 1] if len(normal) > keep else None,
                turns_summarized=len(normal) - len(kept),
            )
        else:
            draft = text_turn(session, head, f"question {index}")
            normal.append(draft.id)
        outcome = ledger.turns.commit(draft, epoch=epoch)
        assert outcome.committed, outcome.reason
        head = draft.id
        chain.append(draft.id)
    return chain


def current_depth(ledger: Ledger, head: str | None) -> int:
    if head is None:
        return 0
    thread = ledger.threads.get_thread(head)
    assert thread is not None
    return thread.depth


def free_port() -> int:
    """A loopback port nothing listens on (for servers the tests start)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def recorded_statements(database: Database) -> Iterator[list[str]]:
    """Every statement `database` sends while the block runs, in order, as sent."""
    from sqlalchemy import event

    seen: list[str] = []

    def record(_conn: object, _cursor: object, sql: str, *_: object) -> None:
        seen.append(sql)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", record)


@contextmanager
def served_app(app: Any, **config: Any) -> Iterator[str]:
    """`app` on a real loopback uvicorn server, as `nexus dev` serves it (`config`: more
    uvicorn settings); yields its URL."""
    import threading
    import time

    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", **config)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30  # a loaded machine may take seconds to start it
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def port_open(port: int) -> bool:
    """True once something accepts connections on the loopback port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@dataclass
class RunOnRing(RecordingDoorbell):
    """A doorbell answered at once by another worker: each ring runs the session."""

    runner: SessionRunner | None = None
    reports: list[str] = field(default_factory=list)

    def session_has_work(self, session_id: str) -> None:
        super().session_has_work(session_id)
        if self.runner is not None:
            self.reports.append(self.runner.run(session_id).status)


# Hook processes for every test's hook runner, as a deployment runs them (started on first
# use, stopped at exit).
HOOK_POOL = HookPool(size=4)


def hook_runner(database: Database, clock: FakeClock, folder: Path, **files: str) -> HookRunner:
    """A hook runner over `files` (name → source) written into `folder`, registered in the
    ledger as `nexus hooks sync` would, running its hooks in hook processes; every file must
    load."""
    for name, source in files.items():
        (folder / f"{name}.py").write_text(source)
    report = load_hooks(folder)
    assert report.problems == ()
    runner = HookRunner(
        database=database,
        hooks=report.hooks,
        doorbell=RecordingDoorbell(),
        clock=clock,
        pool=HOOK_POOL,
    )
    runner.sync()
    return runner


@contextmanager
def serving_cli(tmp_path: Path, monkeypatch: Any, **parts: Any) -> Iterator[Nexus]:
    """An embedded ledger in `tmp_path` (the CLI's default place), served over loopback as
    `nexus dev` serves it, with NEXUS_API_URL and NEXUS_API_TOKEN pointing the CLI at it;
    yields the server's object graph (`parts`: replacements for `bootstrap`, such as a
    doorbell or the worker ping)."""
    from nexus.api.app import create_app
    from nexus.bootstrap import bootstrap
    from nexus.db import Database
    from nexus.db.migrate import upgrade
    from nexus.settings import Settings, get_settings

    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / '.nexus' / 'nexus.db'}"
    (tmp_path / ".nexus").mkdir(exist_ok=True)
    upgrade(url)
    database = Database(url)
    parts.setdefault("doorbell", RecordingDoorbell())
    graph = bootstrap(Settings(api_tokens="tok"), database=database, **parts)
    try:
        with served_app(create_app(graph)) as served:
            monkeypatch.setenv("NEXUS_API_URL", served)
            monkeypatch.setenv("NEXUS_API_TOKEN", "tok")
            get_settings.cache_clear()
            yield graph
    finally:
        get_settings.cache_clear()
        graph.close()  # the ledger's connections and any hook processes a dry run started


@contextmanager
def redis_coordination(**options: Any) -> Iterator[RedisCoordination]:
    """Coordination on the real Redis under a key prefix of its own, its keys deleted after
    (`options`: RedisCoordination's, say a shorter `replay_window_s`)."""
    import redis
    import redis.asyncio

    from nexus.adapters.redis_coordination import RedisCoordination
    from tests.services import REDIS_URL

    client = redis.Redis.from_url(REDIS_URL)
    prefix = f"nexus-test-{uuid.uuid4().hex[:8]}:"
    try:
        yield RedisCoordination(
            client,
            prefix=prefix,
            streams=lambda: redis.asyncio.Redis.from_url(REDIS_URL),
            **options,
        )
    finally:
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()


def route_one(
    uow: UnitOfWork,
    event_id: str,
    policies: Sequence[Policy],
    doorbell: Doorbell,
    *,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy = SHIPPED_QUEUE_POLICY,
) -> ProcessedEvent:
    """The router's live path (`route_waiting`, a batch of what waits) for a test that has
    stored one event: what became of `event_id`, its session rung after commit as the
    router's drain rings it. An event routed before is "already processed"."""
    drained = route_waiting(uow, policies, arrivals=arrivals, queueing=queueing)
    for session_id in drained.sessions:
        uow.after_commit(partial(doorbell.session_has_work, session_id))
    found = [event for event in drained.events if event.event_id == event_id]
    return found[0] if found else ProcessedEvent(event_id, "already processed")
