"""Where an event's cost goes: SQL statements, transactions, Redis round trips and
SQLAlchemy statement compilations per event at each stage of Nexus's pipeline, beside the
bare sketch's, counted in one process.

Each stage runs the real code the processes run — the API's webhook route (in-process via
the ASGI test client), the router task's body, the session run (which sends the turn's reply
to a loopback fake of Telegram), the delivery task's body on the ring the commit left — on a
fresh database and Redis prefix, one event at a time, sessions already warm.
Run: python -m bench.counts
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis.connection
from sqlalchemy import event
from sqlalchemy.sql.compiler import SQLCompiler

from bench import harness
from tests.fakes.platform_server import FakePlatforms

SENDERS, EVENTS = 4, 40
# A burst: this many messages from each sender arrive before the workers get to them
# (below the queue cap, so nothing is dropped).
BURST_PER_SENDER = 15


@contextmanager
def counting(*engines: Any, compiled: Counter[str] | None = None) -> Iterator[Counter[str]]:
    """Counts statements and transactions on `engines`, and Redis round trips and statement
    compilations anywhere; the SQL of each compilation goes to `compiled`, when given.

    A compilation is SQLAlchemy's `SQLCompiler` at work: a statement Core executes missed
    its cache (built anew per call in a shape the cache cannot key), or one handed to
    `repository/driver.py` was not the statement it compiled once. At steady state the hot
    path compiles nothing: its statements are built once, and compiled on first use."""
    counts: Counter[str] = Counter()

    def statement(*_: object) -> None:
        counts["sql"] += 1

    def commit(*_: object) -> None:
        counts["commits"] += 1

    original = redis.connection.AbstractConnection.send_packed_command

    def sent(self: Any, command: Any, check_health: bool = True) -> None:
        counts["redis"] += 1
        original(self, command, check_health)  # type: ignore[no-untyped-call]

    compile_ = SQLCompiler.__init__

    def compiling(self: SQLCompiler, *args: Any, **kwargs: Any) -> None:
        compile_(self, *args, **kwargs)
        counts["compiles"] += 1
        if compiled is not None:
            compiled[" ".join(self.string.split())[:120]] += 1

    for engine in engines:
        event.listen(engine, "before_cursor_execute", statement)
        event.listen(engine, "commit", commit)
    redis.connection.AbstractConnection.send_packed_command = sent  # type: ignore[method-assign]
    SQLCompiler.__init__ = compiling  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        SQLCompiler.__init__ = compile_  # type: ignore[method-assign]
        redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
        for engine in engines:
            event.remove(engine, "before_cursor_execute", statement)
            event.remove(engine, "commit", commit)


def _per_event(
    stages: dict[str, tuple[Callable[[int], None], Any]],
    events: range,
    compiled: dict[str, Counter[str]] | None = None,
) -> dict[str, dict[str, float]]:
    """Each event goes through every stage in turn (so a session run finds one new item,
    as at low load); each stage's counts are its own, and the SQL it compiled goes to
    `compiled[stage]`, when given."""
    totals: dict[str, Counter[str]] = {name: Counter() for name in stages}
    for number in events:
        for name, (stage, engine) in stages.items():
            sql = None if compiled is None else compiled.setdefault(name, Counter())
            with counting(engine, compiled=sql) as counts:
                stage(number)
            totals[name].update(counts)
    return {
        name: {key: value / len(events) for key, value in sorted(found.items())}
        for name, found in totals.items()
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    with harness.database() as url, harness.redis_prefix() as prefix, FakePlatforms() as fake:
        work = Path(os.environ.get("TMPDIR", "/tmp"))
        # Replies go somewhere, as deployed: Telegram's send API, faked on loopback.
        telegram = {"telegram_bot_token": "123:bench", "telegram_api_base": fake.base_url}
        environment = harness.nexus_environment(url, prefix, work, log_level="WARNING", **telegram)
        os.environ.update(environment)
        from fastapi.testclient import TestClient

        from nexus.api.main import build
        from nexus.settings import get_settings

        get_settings.cache_clear()
        from nexus.sessions import signals
        from workers import tasks

        # A running turn asks about the abort flag and the steer inbox at most once per
        # poll interval (50 ms): a rate per time a turn runs, not a cost of the path, so a
        # turn slowed down by a loaded machine asked more often and the counts drifted above
        # their ceilings (10.1 round trips against 10). Counted here, the path alone: no
        # counted turn lives long enough to poll.
        signals.ABORT_POLL_MS = 3_600_000

        client = TestClient(build())
        # The tasks' graph: the one a worker process builds around the Celery app it runs.
        runtime = tasks._runtime()
        database = runtime.database
        runner = runtime.session_runner
        sessions: dict[int, str] = {}
        rung = _delivery_rings(runtime.doorbell)

        def post(number: int) -> None:
            update = harness.telegram_update(10_000 + number, number % SENDERS)
            client.post("/v1/inbound/telegram", json=update, headers=harness.TELEGRAM_HEADERS)

        def route(number: int) -> None:
            tasks._process(f"telegram:{10_000 + number}")

        def turn(number: int) -> None:
            runner.run(sessions[number % SENDERS])

        def deliver(number: int) -> None:
            # The delivery task's body on each ring the turn's commit and sends left.
            while rung:
                runtime.delivery_service.send(rung.pop(0))

        for number in range(SENDERS):  # warm: contacts, entities, sessions, statements
            post(number)
            route(number)
        with database.engine.connect() as connection:
            found = connection.exec_driver_sql(
                "SELECT s.label, s.id FROM sessions s ORDER BY s.created_at"
            ).all()
        for index, (_label, session_id) in enumerate(found):
            sessions[index] = session_id
            runner.run(session_id)
        rung.clear()  # the warm-up's replies are not measured
        measured = range(SENDERS, SENDERS + EVENTS)
        # Stage by stage, each hop on its own, as when the router rings every session;
        # the burst below runs as deployed (the router runs one idle session itself).
        inline, runtime.router.runs = runtime.router.runs, None
        api = client.app.state.nexus.nexus.database.engine  # type: ignore[attr-defined]
        compiled: dict[str, Counter[str]] = {}
        stages = _per_event(
            {
                "api: webhook → event stored, router rung": (post, api),
                "router task: event → queue item, session rung": (route, database.engine),
                "session run: claim → context → model → commit → reply": (turn, database.engine),
                "delivery task: the ring the commit left": (deliver, database.engine),
            },
            measured,
            compiled,
        )
        runtime.router.runs = inline
        # One at a time as deployed: the router runs the session's turn itself, its first
        # claim made in the routing transaction.
        with counting(api, database.engine) as deployed:
            for number in range(SENDERS + EVENTS, SENDERS + 2 * EVENTS):
                post(number)
                route(number)
        burst = _burst(post, tasks, runner, [sessions[n] for n in range(SENDERS)], api, database)
        client.close()
        bare = _bare(database)
    return {
        "nexus": stages,
        "deployed": {key: value / EVENTS for key, value in sorted(deployed.items())},
        "burst": burst,
        "bare": bare,
        # What each stage compiled while measured (the SQL's start, compilations per event).
        "compiled": {
            stage: {sql: count / EVENTS for sql, count in found.most_common()}
            for stage, found in compiled.items()
            if found
        },
        "note": "task bodies only: Celery's own receive/ack/task-event traffic per task "
        "comes on top, alike for both sides (Nexus: 2 tasks per event; bare: 2)",
    }


def _delivery_rings(doorbell: Any) -> list[str]:
    """The deliveries rung from now on (each still rung through the broker as well)."""
    rung: list[str] = []
    ring = doorbell.delivery_ready

    def recorded(delivery_id: str, delay_ms: int = 0) -> None:
        rung.append(delivery_id)
        ring(delivery_id, delay_ms)

    doorbell.delivery_ready = recorded
    return rung


def _burst(
    post: Callable[[int], None],
    tasks: Any,
    runner: Any,
    session_ids: list[str],
    api: Any,
    database: Any,
) -> dict[str, float]:
    """Everything an event costs, all stages together, when messages come in a burst:
    `BURST_PER_SENDER` from each sender are posted, then routed, then answered."""
    first = 100_000
    events = range(first, first + BURST_PER_SENDER * SENDERS)
    with counting(api, database.engine) as counts:
        for number in events:
            post(number)
        tasks._process(f"telegram:{10_000 + first}")
        for session_id in session_ids:
            runner.run(session_id)
    return {key: value / len(events) for key, value in sorted(counts.items())}


def _bare(database: Any) -> dict[str, dict[str, float]]:
    """The bare sketch's two task bodies, called directly, on the same database."""
    from bench import bare_app
    from bench.ledger import _session

    ids = {n: _session(database, f"bare:{n}")[0].id for n in range(SENDERS)}
    engine = bare_app.engine()
    for n in range(SENDERS):  # warm: the router's per-process session cache, the pool
        bare_app.route.run(str(n), "hello")
        bare_app.session.run(ids[n], "hello")

    def route(n: int) -> None:
        bare_app.route.run(str(n % SENDERS), "hi")

    def turn(n: int) -> None:
        bare_app.session.run(ids[n % SENDERS], "hi")

    return _per_event(
        {"router task": (route, engine), "session task": (turn, engine)}, range(EVENTS)
    )


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
