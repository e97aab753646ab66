"""Hook evaluation as an obligation: written with the event, discharged once per hook, rung
again by the relay while it is due, and never through a hook's own lineage."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from nexus.adapters.scripted import CallTools, Say
from nexus.db import Database
from nexus.db.migrate import upgrade
from nexus.doorbell import RecordingDoorbell
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.relay import relay, relay_hooks
from nexus.ingest.service import ingest
from nexus.ledger.enums import HookObligation
from nexus.ledger.hook_lineage import LINEAGE
from nexus.ledger.records import EventDraft
from nexus.queueing.coordination import InProcessCoordination
from tests.contract.agent_support import build_office, workers_of
from tests.support import FakeClock, hook_runner

HEADER = "import time\nfrom nexus.hooks.spec import HookContext, HookMeta, HookResult, Routing\n"
COUNTING = (
    HEADER
    + """
HOOK = HookMeta(name="counting")
def evaluate(ctx: HookContext) -> HookResult:
    ctx.state[ctx.event.id] = ctx.state.get(ctx.event.id, 0) + 1
    return HookResult()
"""
)
NOTING = (
    HEADER
    + """
HOOK = HookMeta(name="noting")
def evaluate(ctx: HookContext) -> HookResult:
    ctx.state[ctx.event.id] = True
    return HookResult()
"""
)
MINUTELY = (
    HEADER
    + """
HOOK = HookMeta(name="minutely", schedule="* * * * *")
def evaluate(ctx: HookContext) -> HookResult:
    return HookResult(fire=True)
"""
)
# Fires on everything, into the manager's session: without the lineage guard, the manager's
# answer to a firing (an agent event) would fire it again, and again.
ECHO = (
    HEADER
    + """
HOOK = HookMeta(name="echo")
def evaluate(ctx: HookContext) -> HookResult:
    return HookResult(fire=True, routing=Routing(kind="session", target="dm:ent_boss"),
                      prompt="look at " + ctx.event.id)
"""
)
SLOW_FIRING = (
    HEADER
    + """
HOOK = HookMeta(name="slow", timeout_s=5.0)
def evaluate(ctx: HookContext) -> HookResult:
    ctx.state["calls"] = ctx.state.get("calls", 0) + 1
    time.sleep(0.3)
    return HookResult(fire=True, routing=Routing(kind="session", target="alerts"))
"""
)


def _store(database: Database, draft: EventDraft) -> None:
    """Stored and settled, as a message sent through the API is (it needs no router)."""
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(draft)
        uow.ledger.events.mark_processed(draft.id, "queued", "test")
        uow.commit()


def _api(event_id: str, text: str = "x") -> EventDraft:
    return EventDraft(id=event_id, adapter="api", platform="api", text=text, occurred_at=0)


def _status(database: Database, event_id: str) -> str | None:
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(event_id)
    assert event is not None
    return event.hooks_status


def _telegram(event_id: str, sender: str = "ann") -> NexusEvent:
    return NexusEvent(
        id=event_id,
        adapter="telegram",
        platform="telegram",
        sender=Author(id=sender),
        container=Container(kind="dm", id=sender),
        text="hello",
        occurred_at=0,
    )


def _calls(database: Database, hook: str) -> list[str]:
    with database.unit_of_work() as uow:
        return [c["event_id"] for c in uow.ledger.hooks.invocations_of(hook)]


# -- the obligation, written with the event ---------------------------------------------------


def test_an_event_owes_the_hooks_only_while_a_hook_is_enabled(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    _store(database, _api("api:before"))
    hook_runner(database, clock, tmp_path, counting=COUNTING)
    _store(database, _api("api:after"))
    assert _status(database, "api:before") is None  # no hook then: a deployment pays nothing
    assert _status(database, "api:after") == HookObligation.DUE


def test_every_door_writes_the_obligation_but_hooks_firings_and_outbound_events(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    hook_runner(database, clock, tmp_path, counting=COUNTING)
    doorbell = RecordingDoorbell()
    with database.unit_of_work() as uow:
        # A person's first message (contact created), their second (on Postgres the one
        # statement that touches a known sender's contact and stores the event).
        ingest(uow, [_telegram("telegram:1")], doorbell)
        ingest(uow, [_telegram("telegram:2")], doorbell)
        uow.ledger.events.insert(
            EventDraft(id="hook:x:api:1", adapter="hook", platform="api", occurred_at=0)
        )
        uow.ledger.events.insert(
            EventDraft(
                id="reply:1", adapter="telegram", platform="telegram", direction="outbound",
                occurred_at=0,
            ),
            disposition="delivering",
        )  # fmt: skip
        uow.commit()
    assert _status(database, "telegram:1") == HookObligation.DUE
    assert _status(database, "telegram:2") == HookObligation.DUE
    assert _status(database, "hook:x:api:1") is None
    assert _status(database, "reply:1") is None


def test_an_aborted_transaction_leaves_no_obligation_and_no_event(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    hook_runner(database, clock, tmp_path, counting=COUNTING)
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(_api("api:lost"))  # never committed
    with database.unit_of_work() as uow:
        assert uow.ledger.events.get("api:lost") is None
        assert uow.ledger.events.hooks_owed(received_by=clock()) == []


# -- discharged once per hook ------------------------------------------------------------------


def test_a_run_marks_the_obligation_done_and_a_second_run_evaluates_nothing(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, counting=COUNTING)
    _store(database, _api("api:1"))
    assert len(runner.run("api:1")) == 1
    assert _status(database, "api:1") == HookObligation.DONE
    assert runner.run("api:1") == []
    with database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("counting")
    assert hook is not None and hook.state == {"api:1": 1}
    assert _calls(database, "counting") == ["api:1"]


def test_the_runner_skips_hooks_that_already_have_their_invocation(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    """A run that died after recording one hook's call (or a run that finished one hook
    before another run started) leaves that hook's call standing: only the others run."""
    runner = hook_runner(database, clock, tmp_path, counting=COUNTING, noting=NOTING)
    _store(database, _api("api:1"))
    with database.unit_of_work() as uow:
        recorded = uow.ledger.hooks.record_invocation(
            "counting", event_id="api:1", started_at=0, latency_ms=1, fired=False,
            result=None, error=None,
        )  # fmt: skip
        again = uow.ledger.hooks.record_invocation(
            "counting", event_id="api:1", started_at=0, latency_ms=1, fired=False,
            result=None, error=None,
        )  # fmt: skip
        uow.commit()
    assert (recorded, again) == (True, False)  # one invocation per hook and event
    [ran] = runner.run("api:1")
    assert ran.hook.meta.name == "noting"
    with database.unit_of_work() as uow:
        counting = uow.ledger.hooks.get("counting")
    assert counting is not None and counting.state == {}  # not evaluated again
    assert _calls(database, "counting") == ["api:1"]
    assert _status(database, "api:1") == HookObligation.DONE


def test_an_event_no_hook_applies_to_is_done_at_once(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, minutely=MINUTELY)
    _store(database, _api("api:1"))  # not a timer minute: the scheduled hook does not see it
    assert runner.run("api:1") == []
    assert _status(database, "api:1") == HookObligation.DONE
    assert _calls(database, "minutely") == []


@pytest.mark.postgres
def test_runs_of_one_event_at_once_fire_its_hook_once(
    pg_database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    """Rung twice (the router after its inline turn, and the relay), two workers evaluate
    the same event at the same moment: the first to record the call keeps its state change
    and its firing, the other's are discarded."""
    runner = hook_runner(pg_database, clock, tmp_path, slow=SLOW_FIRING)
    _store(pg_database, _api("api:1"))
    start = threading.Barrier(2)
    recorded: list[int] = []

    def one() -> None:
        start.wait()
        recorded.append(len(runner.run("api:1")))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    with pg_database.unit_of_work() as uow:
        hook = uow.ledger.hooks.get("slow")
        alerts = uow.ledger.sessions.resolve("alerts")
        assert alerts is not None
        items = uow.ledger.queue.for_session(alerts.id)
        invocations = uow.ledger.hooks.invocations_of("slow")
    assert sorted(recorded) == [0, 1]
    assert [(c["event_id"], c["fired"]) for c in invocations] == [("api:1", True)]
    assert hook is not None and hook.state == {"calls": 1}
    assert [i.event_id for i in items] == ["hook:slow:api:1"]
    assert _status(pg_database, "api:1") == HookObligation.DONE


# -- taken up again --------------------------------------------------------------------------


def test_the_relay_rings_due_obligations_past_the_grace_and_not_done_ones(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, counting=COUNTING)
    _store(database, _api("api:old"))
    _store(database, _api("api:done"))
    runner.run("api:done")
    clock.advance(30_000)
    _store(database, _api("api:young"))
    doorbell = RecordingDoorbell()
    with database.unit_of_work() as uow:
        counts = relay(uow, doorbell, hooks_grace_ms=10_000)
    assert doorbell.hooks == ["api:old"] and counts.hooks == 1
    with database.unit_of_work() as uow:  # a worker starting: everything still due, at once
        relay(uow, doorbell, grace_ms=0, hooks_grace_ms=0)
    assert doorbell.hooks == ["api:old", "api:old", "api:young"]
    runner.run("api:old")  # the ring is idempotent, and once done the relay is quiet
    runner.run("api:old")
    with database.unit_of_work() as uow:
        relay(uow, doorbell, grace_ms=0, hooks_grace_ms=0)
    assert doorbell.hooks[3:] == ["api:young"]
    assert _calls(database, "counting") == ["api:done", "api:old"]


def test_the_relay_leaves_an_event_waiting_for_the_router_to_it(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    hook_runner(database, clock, tmp_path, counting=COUNTING)
    with database.unit_of_work() as uow:
        ingest(uow, [_telegram("telegram:1")], RecordingDoorbell())
        uow.commit()
    clock.advance(1)
    doorbell = RecordingDoorbell()
    with database.unit_of_work() as uow:
        relay(uow, doorbell, grace_ms=0, hooks_grace_ms=0)
    assert doorbell.events == ["telegram:1"] and doorbell.hooks == []


def test_relays_in_many_workers_ring_an_obligation_once_per_grace(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    hook_runner(database, clock, tmp_path, counting=COUNTING)
    _store(database, _api("api:1"))
    clock.advance(60_000)
    flags, doorbell = InProcessCoordination(), RecordingDoorbell()
    with database.unit_of_work() as uow:
        rung = [relay_hooks(uow, doorbell, flags=flags) for _ in range(3)]  # three watchdogs
    assert rung == [1, 0, 0] and doorbell.hooks == ["api:1"]


# -- agents' events, and the lineage guard ----------------------------------------------------


def test_a_hook_never_evaluates_what_its_own_firing_caused(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    """`echo` fires on every event into the manager's session; the manager's turn answering
    that firing dispatches a worker, whose task (an agent event) and whose result (another)
    owe the hooks an evaluation like any event: `noting` sees both, `echo` neither."""
    office = build_office(database, clock)
    hooks = hook_runner(database, clock, tmp_path, echo=ECHO, noting=NOTING)
    _store(database, _api("api:1", "the first event"))
    hooks.run("api:1")
    office.model.push(CallTools((("agent_send", {"op": "dispatch", "text": "look"}),)), Say("ok"))
    assert office.runner.run(office.manager.id).turns == 1  # answers hook:echo:api:1
    [worker] = workers_of(office)
    task = f"agent:{worker.label}:task"
    with database.unit_of_work() as uow:
        fired = uow.ledger.events.payload_of("hook:echo:api:1")
        posted = uow.ledger.events.payload_of(task)
    assert fired[LINEAGE] == ["echo"] and posted[LINEAGE] == ["echo"]
    assert task in office.doorbell.hooks  # rung after the turn's commit
    assert [i.hook.meta.name for i in hooks.run(task)] == ["noting"]
    office.model.push(Say("looked"))
    office.runner.run(worker.id)
    [result] = [e for e in _events(database) if e.startswith("worker_result:")]
    assert [i.hook.meta.name for i in hooks.run(result)] == ["noting"]
    assert _calls(database, "echo") == ["api:1"]
    assert sorted(_calls(database, "noting")) == sorted(["api:1", task, result])
    assert {_status(database, e) for e in ("api:1", task, result)} == {HookObligation.DONE}
    assert _status(database, "hook:echo:api:1") is None


def _events(database: Database) -> list[str]:
    with database.unit_of_work() as uow:
        return [e.id for e in uow.ledger.events.recent(limit=100)]


# -- the migration ---------------------------------------------------------------------------


def test_migration_0013_owes_hooks_for_waiting_events_and_keeps_one_call_per_hook(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'nexus.db'}"
    upgrade(url, "0012")
    database = Database(url)
    try:
        with database.engine.begin() as connection:
            connection.exec_driver_sql(
                "INSERT INTO hooks (name, path, description, mode, enabled, breaker_state, "
                "consecutive_errors, state, created_at, updated_at) "
                "VALUES ('h', 'h.py', '', 'persistent', 1, 'closed', 0, '{}', 0, 0)"
            )
            for event_id, status in (("api:waiting", "received"), ("api:routed", "processed")):
                connection.exec_driver_sql(
                    "INSERT INTO events (id, adapter, platform, direction, kind, occurred_at, "
                    "received_at, attachments, payload, status) VALUES "
                    f"('{event_id}', 'api', 'api', 'inbound', 'message', 0, 0, '[]', '{{}}', "
                    f"'{status}')"
                )
            for invocation in ("01A", "01B"):  # one event's hook called twice, before 0013
                connection.exec_driver_sql(
                    "INSERT INTO hook_invocations (id, hook_name, event_id, started_at, "
                    f"latency_ms, fired) VALUES ('{invocation}', 'h', 'api:routed', 0, 1, 0)"
                )
        upgrade(url)
        assert _status(database, "api:waiting") == HookObligation.DUE
        assert _status(database, "api:routed") is None
        with database.unit_of_work() as uow:
            kept = [c["id"] for c in uow.ledger.hooks.invocations_of("h")]
        assert kept == ["01A"]
    finally:
        database.close()
