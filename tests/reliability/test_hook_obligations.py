"""Hook evaluation cannot be lost: a worker killed in the router's inline turn (before the
hooks it owed ran), and Redis flushed between a commit and its hooks ring. A fresh worker's
relay takes the obligations up from the ledger, and each event's hooks run exactly once."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from textwrap import dedent

import pytest
import redis

from nexus.arrival.messages import send_to_session
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.hooks.registry import register_directory
from nexus.ledger.enums import HookObligation, QueueMode, QueueStatus
from nexus.settings import Settings
from nexus.timer.tick import tick
from tests.integration.session_support import LABEL, THREADS, Cluster, cluster
from tests.integration.worker_process import celery_worker, wait_for
from tests.throwaway import ThrowawayRedis, throwaway_redis

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

# Counts, in its own state, how many times it was evaluated on each event: a second
# evaluation whose outcome were kept would show as 2.
TALLY = """
from nexus.hooks.spec import HookMeta, HookResult

HOOK = HookMeta(name="tally", timeout_s=2.0)


def evaluate(ctx):
    ctx.state[ctx.event.id] = ctx.state.get(ctx.event.id, 0) + 1
    return HookResult()
"""


@pytest.fixture
def live_db(watched_db: Database) -> Iterator[Database]:
    """The scenario's ledger on the real clock: the relay's grace is measured against the
    workers' clocks, and an event stored at the fake clock's time looks months old."""
    database = Database(watched_db.url)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[ThrowawayRedis]:
    """A Redis of this scenario's own, which it may flush (the shared one never is)."""
    with throwaway_redis(tmp_path) as server:
        yield server


def _tally_hook(database: Database, tmp_path: Path) -> Path:
    """The hooks directory every worker loads, registered as a deploy does: before the
    scenario's events are stored, so each of them owes the hook its evaluation."""
    directory = tmp_path / "hooks"
    directory.mkdir()
    (directory / "tally.py").write_text(dedent(TALLY))
    problems: list[str] = []
    runner = bootstrap(Settings(hooks_dir=str(directory)), database=database).fresh_hook_runner(
        on_problem=problems.append
    )
    register_directory(runner, directory, problems, allow_empty=False)
    return directory


def _obligations(database: Database) -> dict[str, str | None]:
    with database.unit_of_work() as uow:
        rows = uow.connection.exec_driver_sql(
            "SELECT id, hooks_status FROM events WHERE direction = 'inbound' AND adapter <> 'hook'"
        ).all()
    return {row[0]: row[1] for row in rows}


def _tally(database: Database) -> tuple[dict[str, int], list[str]]:
    """The hook's state (evaluations per event) and the events it has invocations for."""
    with database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("tally")
        calls = uow.ledger.hooks.invocations_of("tally")
    assert hook is not None
    return dict(hook.state), sorted(str(c["event_id"]) for c in calls)


def _all_done(database: Database) -> bool:
    return set(_obligations(database).values()) == {HookObligation.DONE}


def test_kill_9_in_the_routers_inline_turn_leaves_the_hooks_to_a_fresh_worker(
    watched_db: Database, live_db: Database, tmp_path: Path
) -> None:
    """The router runs the message's turn inline and the hooks after it: killed in the turn,
    it never gets to them. Nothing rings them again but the ledger's obligation (here the
    fresh worker's relay as it starts: the watchdogs' grace is far longer than this turn)."""
    hooks = _tally_hook(watched_db, tmp_path)
    slow_model = {"NEXUS_HOOKS_DIR": str(hooks), "NEXUS_SCRIPTED_DELAY_MS": "5000"}
    with cluster(live_db, tmp_path, mode=QueueMode.QUEUE, extra_env=slow_model) as nodes:
        nodes.send(["hello"])
        # The router claims the item inline, in its routing transaction, then runs the turn
        # (its model call takes 5 s), and only then the hooks.
        wait_for(lambda: _claimed(nodes), what="the router's inline claim")
        [victim], [log] = nodes.workers, nodes.logs
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        text = log.read_text()
        routers = set(re.findall(r"Task nexus\.event\.process\[([0-9a-f-]+)\] received", text))
        assert routers and all(f"[{task}] succeeded" not in text for task in routers), text
        assert "nexus.session.run[" not in text
        assert _obligations(watched_db) == {"telegram:hello": HookObligation.DUE}
        assert _tally(watched_db) == ({}, [])
        quick = {**nodes.environment, "NEXUS_SCRIPTED_DELAY_MS": "0"}
        with celery_worker(
            quick, tmp_path / "fresh.log", queues="events,sessions", threads=THREADS
        ):
            wait_for(lambda: _all_done(watched_db), what="the hooks the dead router owed")
            wait_for(lambda: nodes.settled(1), what="the message answered")
    assert _tally(watched_db) == ({"telegram:hello": 1}, ["telegram:hello"])


def _claimed(nodes: Cluster) -> bool:
    return [item.status for item in nodes.items()] == [QueueStatus.CLAIMED]


def test_a_redis_flush_between_commit_and_hooks_loses_no_evaluation(
    watched_db: Database, tmp_path: Path, own_redis: ThrowawayRedis
) -> None:
    """Three doors, each ringing the hooks (or the router that runs them) after its commit:
    a platform message, a message sent through the API, a timer minute. No worker listens
    yet; Redis is flushed, and every ring with it. A worker that starts then finds the
    obligations in the ledger."""
    hooks = _tally_hook(watched_db, tmp_path)
    environment = {"NEXUS_REDIS_URL": own_redis.url, "NEXUS_HOOKS_DIR": str(hooks)}
    with cluster(
        watched_db, tmp_path, mode=QueueMode.QUEUE, workers=0, extra_env=environment
    ) as nodes:
        nodes.send(["routed"])
        with watched_db.unit_of_work() as uow:
            api = send_to_session(uow, LABEL, "by the api", nodes.doorbell).event_id
            uow.commit()
        with watched_db.unit_of_work() as uow:
            [minute] = tick(uow, nodes.doorbell, now_ms=uow.ledger.clock()).minutes
            uow.commit()
        owed = _obligations(watched_db)
        assert set(owed.values()) == {HookObligation.DUE} and len(owed) == 3
        flushed = redis.Redis.from_url(own_redis.url)
        assert flushed.dbsize() > 0  # the rings were there
        flushed.flushall()
        with celery_worker(
            nodes.environment, tmp_path / "fresh.log", queues="events,sessions", threads=THREADS
        ):
            wait_for(lambda: _all_done(watched_db), what="every event's hooks")
            wait_for(lambda: nodes.settled(2), what="both messages answered")
    state, invoked = _tally(watched_db)
    assert state == dict.fromkeys(owed, 1)
    assert invoked == sorted(owed)
    assert {"telegram:routed", api} < set(owed) and minute > 0
