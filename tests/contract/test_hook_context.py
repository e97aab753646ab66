"""What a hook's context reaches in the ledger, asked of the worker from the hook process:
read-only SQL (`ctx.sql`), and what the hook knows of itself (`ctx.hook`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect

from nexus.db import Database
from nexus.db import read_only as read_only_module
from nexus.db.read_only import (
    ReadOnlyQueryError,
    TooManyRows,
    WriteRefused,
    run_read_only,
)
from nexus.hooks.lookups import HookLookups
from nexus.hooks.spec import HookSqlError
from nexus.ledger.records import EventDraft
from tests.support import FakeClock, hook_runner

HEADER = "from nexus.hooks.spec import HookContext, HookMeta, HookResult, HookSqlError\n"
READER = """
HOOK = HookMeta(name="reader", timeout_s=5.0)
def evaluate(ctx):
    rows = ctx.sql(
        "SELECT id, text FROM events WHERE sender_id = :who ORDER BY received_at",
        {"who": ctx.event.sender_id},
    )
    return HookResult(fire=False, extracted={"rows": rows})
"""
WRITES = (
    "INSERT INTO timer_state (id, last_tick_minute) VALUES (7, 0)",
    "UPDATE events SET text = 'changed'",
    "DELETE FROM events",
    "CREATE TABLE hooks_were_here (a INTEGER)",
    "DROP TABLE hook_invocations",
    "ALTER TABLE events ADD COLUMN mine TEXT",
    "SELECT 1; DELETE FROM events",
)
WRITER = f"""
HOOK = HookMeta(name="writer", timeout_s=5.0)
WRITES = {WRITES!r}
def evaluate(ctx):
    refused = {{}}
    for statement in WRITES:
        try:
            ctx.sql(statement)
        except HookSqlError as error:
            refused[statement] = str(error)
    return HookResult(extracted={{"refused": refused}})
"""
SLOW = """
HOOK = HookMeta(name="slow", timeout_s=10.0)
LOOP = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
def evaluate(ctx):
    try:
        ctx.sql(LOOP)
    except HookSqlError as error:
        return HookResult(extracted={"error": str(error)})
    return HookResult(extracted={"error": None})
"""
SELF = """
HOOK = HookMeta(name="itself", timeout_s=5.0)
def evaluate(ctx):
    me = ctx.hook
    last = me.last_run
    ctx.state["calls"] = ctx.state.get("calls", 0) + 1
    if ctx.event.text == "fail":
        raise ValueError("asked to fail")
    return HookResult(
        fire=ctx.event.text == "fire",
        prompt="fired",
        extracted={
            "name": me.name,
            "registered": me.registered,
            "saved": dict(me.saved_state),
            "last_event": None if last is None else last.event_id,
            "last_fired": None if last is None else last.fired,
            "last_error": None if last is None else last.error,
            "last_started": None if last is None else last.started_at,
            "last_result": None if last is None else last.result,
        },
    )
"""


def _event(database: Database, clock: FakeClock, event_id: str, text: str) -> None:
    clock.advance(1000)
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(
            EventDraft(
                id=event_id,
                adapter="api",
                platform="api",
                sender_id="ada",
                text=text,
                occurred_at=clock.now,
            )
        )
        uow.commit()


def _result(database: Database, hook: str, event_id: str) -> dict[str, Any]:
    with database.reading() as uow:
        calls = uow.ledger.hooks.invocations_of(hook)
    [call] = [c for c in calls if c["event_id"] == event_id]
    assert call["error"] is None, call["error"]
    extracted: dict[str, Any] = call["result"]["extracted"]
    return extracted


def _ledger(database: Database) -> tuple[Any, ...]:
    """Everything a write could have changed: tables, columns, events, timer rows."""
    with database.reading() as uow:
        events = [(e.id, e.text) for e in uow.ledger.events.recent(limit=100)]
        invocations = uow.ledger.hooks.invocations_of("writer")
    schema = inspect(database.engine)
    tables = sorted(schema.get_table_names())
    columns = sorted(c["name"] for c in schema.get_columns("events"))
    return tables, columns, events, len(invocations)


def test_a_hook_reads_the_ledger_with_sql_from_its_process(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, reader=HEADER + READER)
    _event(database, clock, "api:1", "first")
    _event(database, clock, "api:2", "second")
    runner.run("api:2")
    assert _result(database, "reader", "api:2")["rows"] == [
        {"id": "api:1", "text": "first"},
        {"id": "api:2", "text": "second"},
    ]


def test_every_write_is_refused_as_read_only_and_changes_nothing(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, writer=HEADER + WRITER)
    _event(database, clock, "api:1", "untouched")
    before = _ledger(database)
    runner.run("api:1")
    refused = _result(database, "writer", "api:1")["refused"]
    assert set(refused) == set(WRITES)
    for statement, error in refused.items():
        if ";" in statement:
            assert "one statement at a time" in error
        else:
            assert error.startswith("SQL for hooks is read-only"), error
    tables, columns, events, _ = _ledger(database)
    assert (tables, columns, events) == before[:3]


@pytest.mark.parametrize("statement", WRITES[:-1])
def test_the_database_itself_refuses_writes_past_the_check(
    database: Database, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, statement: str
) -> None:
    """The statement check is the readable refusal; the database is what holds even when
    a write gets past it: on SQLite the read-only connection and its authorizer, on
    Postgres the server-side cursor (a query, never a command) in a read-only transaction."""
    monkeypatch.setattr(read_only_module, "read_only_statement", lambda query: query)
    _event(database, clock, "api:1", "untouched")
    before = _ledger(database)
    with pytest.raises(ReadOnlyQueryError) as refused:
        run_read_only(database, statement, timeout_ms=1000, max_rows=10)
    if database.dialect == "sqlite":
        assert isinstance(refused.value, WriteRefused)
        assert str(refused.value).startswith("SQL for hooks is read-only")
    assert _ledger(database) == before


def test_a_query_that_writes_is_refused_by_the_read_only_transaction(
    pg_database: Database,
) -> None:
    """A SELECT can write on Postgres (a function with effects): the transaction refuses it."""
    with pytest.raises(WriteRefused, match="read-only transaction"):
        run_read_only(
            pg_database,
            "SELECT nextval('metric_deltas_id_seq') AS n",
            timeout_ms=1000,
            max_rows=10,
        )


def test_a_slow_query_is_cut_at_its_bound(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, slow=HEADER + SLOW)
    runner.sql_timeout_ms = 200
    _event(database, clock, "api:1", "anything")
    started = time.monotonic()
    runner.run("api:1")
    assert time.monotonic() - started < 5.0  # cut at 0.2 s, not at the hook's 10 s
    error = _result(database, "slow", "api:1")["error"]
    assert error == "SQL for hooks: the query was cut at its bound of 200 ms"


def test_rows_are_capped_and_parameters_are_json_scalars(database: Database) -> None:
    many = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20) "
    with pytest.raises(TooManyRows, match="more than 10 rows"):
        run_read_only(database, many + "SELECT x FROM c", timeout_ms=1000, max_rows=10)
    rows = run_read_only(database, many + "SELECT x FROM c LIMIT 3", timeout_ms=1000, max_rows=10)
    assert rows == [{"x": 1}, {"x": 2}, {"x": 3}]
    lookups = HookLookups(database)
    assert lookups.sql("SELECT :n AS n, :s AS s", {"n": 2, "s": "x"}) == [{"n": 2, "s": "x"}]
    with pytest.raises(HookSqlError, match="parameter 'ids' is a list"):
        lookups.sql("SELECT 1 AS one", {"ids": [1, 2]})


def test_a_hook_knows_its_name_saved_state_and_last_run(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, itself=HEADER + SELF)
    for event_id, text in [("api:1", "fire"), ("api:2", "fail"), ("api:3", "look")]:
        _event(database, clock, event_id, text)
        runner.run(event_id)
    with database.reading() as uow:
        calls = {c["event_id"]: c for c in uow.ledger.hooks.invocations_of("itself")}
    first, second = calls["api:1"], calls["api:2"]
    assert second["error"] == "ValueError: asked to fail"
    seen_first = first["result"]["extracted"]
    assert seen_first["name"] == "itself" and seen_first["registered"] is True
    assert seen_first["saved"] == {} and seen_first["last_event"] is None
    seen_third = _result(database, "itself", "api:3")
    # Its last run is the failed call on api:2, whose state change was kept (a failing
    # call keeps what it saved, as the breaker counts it).
    assert seen_third["last_event"] == "api:2"
    assert seen_third["last_fired"] is False
    assert seen_third["last_error"] == "ValueError: asked to fail"
    assert seen_third["last_started"] == second["started_at"]
    assert seen_third["last_result"] is None
    with database.reading() as uow:
        row = uow.ledger.hooks.get("itself")
    assert row is not None
    assert seen_third["saved"] == {"calls": row.state["calls"] - 1}


def test_a_dry_run_of_an_unregistered_hook_knows_it_is_not_registered(
    database: Database, clock: FakeClock, tmp_path: Path
) -> None:
    runner = hook_runner(database, clock, tmp_path, itself=HEADER + SELF)
    with database.unit_of_work() as uow:
        uow.connection.exec_driver_sql("DELETE FROM hooks")
        uow.commit()
    _event(database, clock, "api:1", "look")
    with database.reading() as uow:
        stored = uow.ledger.events.get("api:1")
    assert stored is not None
    invocation, result = runner.dry_run("itself", stored)
    assert invocation.error is None and result is not None
    assert result["extracted"]["registered"] is False
    assert result["extracted"]["last_event"] is None
