"""One hook invoked by several workers at once, on Postgres: every invocation counts.

Each thread runs the hook on an event of its own, as workers do, with its own units of
work. The hooks are slow enough that every invocation reads the hook's row before any of
them writes it back: the writes must not be computed from those reads alone.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from nexus.db import Database
from nexus.hooks.breaker import ERRORS_TO_OPEN
from nexus.hooks.service import HookRunner
from nexus.ledger.enums import BreakerState
from nexus.ledger.records import EventDraft
from tests.support import FakeClock, hook_runner

pytestmark = pytest.mark.postgres
PARALLEL = 8
HEADER = "import time\nfrom nexus.hooks.spec import HookContext, HookMeta, HookResult\n"
FAILING = (
    HEADER
    + """
HOOK = HookMeta(name="failing", timeout_s=5.0)
def evaluate(ctx: HookContext) -> HookResult:
    time.sleep(0.3)
    raise RuntimeError("down")
"""
)
ONCE = (
    HEADER
    + """
from nexus.ledger.enums import HookMode
HOOK = HookMeta(name="once", mode=HookMode.ONE_SHOT, timeout_s=5.0)
def evaluate(ctx: HookContext) -> HookResult:
    time.sleep(0.3)
    return HookResult(fire=True, prompt="the first event")
"""
)
COUNTING = (
    HEADER
    + """
HOOK = HookMeta(name="counting", timeout_s=5.0)
def evaluate(ctx: HookContext) -> HookResult:
    ctx.state[ctx.event.id] = True
    time.sleep(0.3)
    return HookResult()
"""
)


def _run_at_once(database: Database, runner: HookRunner, count: int = PARALLEL) -> None:
    """`count` events, each run through the hooks on its own thread, all at once."""
    with database.unit_of_work() as uow:
        for n in range(count):
            uow.ledger.events.insert(
                EventDraft(id=f"api:{n}", adapter="api", platform="api", text="x", occurred_at=0)
            )
        uow.commit()
    start = threading.Barrier(count)
    failures: list[BaseException] = []

    def one(n: int) -> None:
        start.wait()
        try:
            runner.run(f"api:{n}")
        except BaseException as error:  # reported by the assert below
            failures.append(error)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []


def test_every_failure_of_parallel_invocations_counts_toward_the_breaker(
    pg_database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(pg_database, clock, tmp_path, failing=FAILING)
    _run_at_once(pg_database, runner)
    with pg_database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("failing")
        calls = uow.ledger.hooks.invocations_of("failing")
    assert len(calls) == PARALLEL > ERRORS_TO_OPEN
    assert hook is not None
    assert (hook.consecutive_errors, hook.breaker_state) == (PARALLEL, BreakerState.OPEN)


def test_a_one_shot_hook_invoked_in_parallel_fires_once(
    pg_database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(pg_database, clock, tmp_path, once=ONCE)
    _run_at_once(pg_database, runner)
    with pg_database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("once")
        calls = uow.ledger.hooks.invocations_of("once")
        fired_events = [
            e for e in uow.ledger.events.recent(limit=50) if e.id.startswith("hook:once:")
        ]
    assert hook is not None and hook.enabled is False
    assert sum(c["fired"] for c in calls) == 1
    assert len(fired_events) == 1


def test_a_disable_made_while_a_hook_runs_is_not_undone(
    pg_database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(pg_database, clock, tmp_path, counting=COUNTING)
    with pg_database.unit_of_work() as uow:
        uow.ledger.events.insert(
            EventDraft(id="api:1", adapter="api", platform="api", text="x", occurred_at=0)
        )
        uow.commit()
    running = threading.Thread(target=runner.run, args=("api:1",))
    running.start()
    threading.Event().wait(0.1)  # the hook is evaluating now (it takes 0.3 s)
    with pg_database.unit_of_work() as uow:  # an operator's `disable`
        uow.ledger.hooks.set_enabled("counting", False)
        uow.commit()
    running.join(10)
    with pg_database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("counting")
    assert hook is not None and hook.enabled is False
    assert hook.state == {"api:1": True}  # what the call did is kept all the same


def test_state_written_by_parallel_invocations_is_all_kept(
    pg_database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(pg_database, clock, tmp_path, counting=COUNTING)
    _run_at_once(pg_database, runner)
    with pg_database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("counting")
    assert hook is not None
    assert hook.state == {f"api:{n}": True for n in range(PARALLEL)}
