"""Hooks on the ledger (table sync, invocations, breaker, one-shot, firing into a session)
and the timer (watermark, exactly-once minutes with two tickers), on SQLite and Postgres."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import event

from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.hooks.breaker import COOL_DOWN_MS
from nexus.hooks.service import HookRunner
from nexus.ledger.records import EventDraft
from nexus.timer.tick import tick, timer_event_id
from tests.support import FakeClock, hook_runner

ROUTER_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing
HOOK = HookMeta(name="invoices", description="invoice mail to finance")
def evaluate(ctx: HookContext) -> HookResult:
    if "invoice" not in (ctx.event.text or ""):
        return HookResult()
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1
    return HookResult(fire=True, routing=Routing(kind="session", target="finance"),
                      prompt="file this invoice: " + ctx.event.text)
"""
ONCE_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
from nexus.ledger.enums import HookMode
HOOK = HookMeta(name="once", mode=HookMode.ONE_SHOT)
def evaluate(ctx: HookContext) -> HookResult:
    return HookResult(fire=True, prompt="first event seen")
"""
BROKEN_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="broken")
def evaluate(ctx: HookContext) -> HookResult:
    if ctx.state.get("healed"):
        return HookResult()
    raise RuntimeError("bad day")
"""
CRON_HOOK = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="every-minute", schedule="* * * * *")
def evaluate(ctx: HookContext) -> HookResult:
    return HookResult(fire=True, prompt="minute " + str(ctx.minute_ms))
"""


def _event(database: Database, event_id: str, text: str) -> None:
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(
            EventDraft(id=event_id, adapter="api", platform="api", text=text, occurred_at=0)
        )
        uow.commit()


def test_a_fired_hook_queues_its_prompt_once_and_keeps_its_state(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, invoices=ROUTER_HOOK)
    _event(database, "api:1", "the ACME invoice is attached")
    _event(database, "api:2", "lunch?")
    runner.run("api:1")
    assert runner.run("api:1") == []  # rung again: evaluated already, nothing runs
    runner.run("api:2")
    with database.unit_of_work() as uow:
        finance = uow.ledger.sessions.resolve("finance")
        assert finance is not None
        items = uow.ledger.queue.for_session(finance.id)
        fired = uow.ledger.events.get("hook:invoices:api:1")
        hook = uow.ledger.hooks.get("invoices")
        calls = uow.ledger.hooks.invocations_of("invoices")
    assert [i.event_id for i in items] == ["hook:invoices:api:1"]
    assert fired is not None and fired.text == "file this invoice: the ACME invoice is attached"
    assert hook is not None and hook.state == {"seen": 1} and hook.last_fired_at is not None
    assert [(c["event_id"], c["fired"]) for c in calls] == [("api:1", True), ("api:2", False)]
    assert all(c["latency_ms"] >= 0 and c["error"] is None for c in calls)


def test_a_one_shot_hook_fires_once_then_disables_itself(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, once=ONCE_HOOK)
    for n in range(3):
        _event(database, f"api:{n}", "anything")
        runner.run(f"api:{n}")
    with database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("once")
        calls = uow.ledger.hooks.invocations_of("once")
    assert hook is not None and hook.enabled is False
    assert [c["fired"] for c in calls] == [True]


def test_the_breaker_opens_half_opens_and_closes(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, broken=BROKEN_HOOK)
    for n in range(7):
        _event(database, f"api:{n}", "x")
        runner.run(f"api:{n}")
    with database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("broken")
        assert hook is not None
        calls = uow.ledger.hooks.invocations_of("broken")
    assert hook.breaker_state == "open" and len(calls) == 5  # calls 6 and 7 never ran
    assert calls[0]["error"] == "RuntimeError: bad day"
    clock.advance(COOL_DOWN_MS - 1)
    assert runner.cool_breakers() == []  # the timer's tick: not cooled down yet
    clock.advance(1)
    assert runner.cool_breakers() == ["broken"]
    with database.unit_of_work() as uow:
        cooled = uow.ledger.hooks.get("broken")
    assert cooled is not None and cooled.breaker_state == "half_open"
    hook = cooled
    with database.unit_of_work() as uow:  # the script is fixed meanwhile
        uow.ledger.hooks.after_call(
            "broken",
            breaker_state="half_open",
            consecutive_errors=5,
            opened_at=hook.opened_at,
            state={"healed": True},
            enabled=True,
            fired_at=None,
        )
        uow.commit()
    _event(database, "api:trial", "x")
    runner.run("api:trial")
    with database.unit_of_work() as uow:
        healed = uow.ledger.hooks.get("broken")
    assert healed is not None and healed.breaker_state == "closed"
    assert healed.consecutive_errors == 0


def test_a_hook_file_that_disappears_is_disabled(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    hook_runner(database, clock, tmp_path, invoices=ROUTER_HOOK, once=ONCE_HOOK)
    (tmp_path / "once.py").unlink()
    hook_runner(database, clock, tmp_path)
    with database.unit_of_work() as uow:
        states = {h.name: h.enabled for h in uow.ledger.hooks.all()}
    assert states == {"invoices": True, "once": False}


def test_a_tick_emits_each_minute_once_and_catches_up(database: Database, clock: FakeClock) -> None:
    doorbell = RecordingDoorbell()
    for advance in (0, 30_000, 30_000, 180_000):
        clock.advance(advance)
        with database.unit_of_work() as uow:
            tick(uow, doorbell, now_ms=clock.now)
            uow.commit()
    start = clock.now - 240_000
    # A minute needs no routing: it rings the hooks directly, never the router.
    assert doorbell.events == []
    assert doorbell.hooks == [timer_event_id(start + n * 60_000) for n in range(5)]


def test_two_tickers_at_once_for_three_minutes_fire_each_cron_minute_once(
    pg_database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    database = pg_database
    runner = hook_runner(database, clock, tmp_path, cron=CRON_HOOK)
    doorbell = RecordingDoorbell()
    for _ in range(4):  # now, +1, +2, +3 minutes: both "beats" tick each time, racing
        barrier = threading.Barrier(2)

        def beat(barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            with database.unit_of_work() as uow:
                tick(uow, doorbell, now_ms=clock.now)
                uow.commit()

        threads = [threading.Thread(target=beat) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        clock.advance(60_000)
    for event_id in doorbell.hooks:
        runner.run(event_id)
        runner.run(event_id)  # a doubled doorbell changes nothing either
    with database.unit_of_work() as uow:
        fired = (
            uow.connection.exec_driver_sql(
                "SELECT id FROM events WHERE adapter = 'hook' ORDER BY id"
            )
            .scalars()
            .all()
        )
    assert len(doorbell.hooks) == 4 and len(set(doorbell.hooks)) == 4
    assert fired == sorted(f"hook:every-minute:{event_id}" for event_id in doorbell.hooks)


HANGING_HOOK = """
import time
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="hangs", timeout_s=0.2)
def evaluate(ctx: HookContext) -> HookResult:
    time.sleep(3600)
    return HookResult(fire=True)
"""


def test_a_hanging_hook_is_cut_and_the_event_still_routes(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    import time

    from nexus.access.policy import load_policies
    from nexus.ingest.service import ingest
    from tests.contract.test_routing import _message
    from tests.support import route_one

    runner = hook_runner(database, clock, tmp_path, hangs=HANGING_HOOK)
    doorbell = RecordingDoorbell()
    with database.unit_of_work() as uow:  # what nexus.event.process does: route, then hooks
        ingest(uow, [_message("sms:1", "sms", "+1555", "hello")], doorbell)
        routed = route_one(uow, "sms:1", load_policies(None), doorbell)
        uow.commit()
    started = time.monotonic()
    (invocation,) = runner.run("sms:1")
    # The hook sleeps an hour: returning at all shows the cut. The bound is loose because a
    # loaded machine may take seconds to start the hook's process; the error names the 0.2 s.
    assert time.monotonic() - started < 30.0
    assert routed.disposition == "queued" and doorbell.sessions
    assert invocation.error == "timed out after 0.2 s"
    with database.unit_of_work() as uow:
        calls = uow.ledger.hooks.invocations_of("hangs")
    assert [(c["fired"], c["error"]) for c in calls] == [(False, "timed out after 0.2 s")]


def test_with_no_hooks_loaded_an_event_costs_the_ledger_nothing(database: Database) -> None:
    runner = HookRunner(database=database, hooks=[], doorbell=RecordingDoorbell())
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        assert runner.run("telegram:1") == []
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    assert statements == []
