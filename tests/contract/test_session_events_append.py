"""A turn's kept events are appended by one statement for any number of rows (a chunk of at
most `ROWS_PER_INSERT`): numbered after the session's last one in order, each row's type and
data stored as given, on every backend and driver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from nexus.db import Database
from nexus.ledger.repository import session_events
from tests.support import FakeClock, new_session, recorded_statements

# Data the JSON has to carry through the statement's own JSON parameter unchanged: text that
# is itself JSON or quotes it, escapes, non-ASCII (NUL is scrubbed before it gets here).
AWKWARD: list[tuple[str, dict[str, Any]]] = [
    ("message.delta", {"text": 'say "hi" \\ then {"x": [1]}', "n": 0}),
    ("message.delta", {"text": "ünïcödé — 日本語 — 🙂\n\ttab", "empty": ""}),
    ("tool.started", {"args": {"nested": [1, 2.5, True, None, {"deep": "[]"}]}, "big": 2**62}),
    ("x\"quoted'type", {}),
    ("step.started", {"text": "[1, 2]", "also": "{}", "negative": -7, "float": 1e-9}),
]


def _inserts(seen: list[str]) -> int:
    return sum(1 for sql in seen if "INSERT INTO session_events" in sql)


def test_rows_are_numbered_after_the_last_one_in_one_statement_with_their_data_as_given(
    database: Database, clock: FakeClock
) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        events = uow.ledger.session_events
        assert events.append(session.id, "t0", [("first", {"n": 1})]) == [1]
        with recorded_statements(database) as seen:
            assert events.append(session.id, "t1", AWKWARD) == [2, 3, 4, 5, 6]
        uow.commit()
    assert _inserts(seen) == 1 and len(seen) == 1
    with database.reading() as uow:
        kept = uow.ledger.session_events.page(session.id, after=1)
    assert [(r.type, r.data) for r in kept] == AWKWARD
    assert [r.sequence for r in kept] == [2, 3, 4, 5, 6]
    assert {(r.session_id, r.turn_id, r.created_at) for r in kept} == {
        (session.id, "t1", clock.now)
    }
    assert len({r.id for r in kept}) == len(kept)


def test_no_rows_write_nothing_and_one_row_is_one_statement(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        events = uow.ledger.session_events
        with recorded_statements(database) as seen:
            assert events.append(session.id, "t1", []) == []
        assert seen == []
        with recorded_statements(database) as seen:
            assert events.append(session.id, "t1", [("only", {"a": 1})]) == [1]
        assert _inserts(seen) == 1
        assert events.last_sequence(session.id) == 1
        uow.commit()


def test_large_data_is_kept_whole(database: Database) -> None:
    large = {"text": "é" * 300_000 + "🙂" * 50_000, "items": list(range(20_000))}
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        assert uow.ledger.session_events.append(session.id, "t1", [("big", large)] * 3) == [
            1,
            2,
            3,
        ]
        uow.commit()
    with database.reading() as uow:
        kept = uow.ledger.session_events.page(session.id)
    assert [r.data for r in kept] == [large] * 3


@pytest.mark.parametrize("count", [5, 6, 7])
def test_a_turn_of_more_rows_than_one_statement_takes_is_appended_in_chunks(
    database: Database, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    monkeypatch.setattr(session_events, "ROWS_PER_INSERT", 3)
    rows = [(f"e{n}", {"n": n}) for n in range(count)]
    with database.unit_of_work() as uow:
        other, session = new_session(uow.ledger, "other"), new_session(uow.ledger)
        events = uow.ledger.session_events
        assert events.append(other.id, "t0", [("x", {})] * 4) == [1, 2, 3, 4]
        assert events.append(session.id, "t0", [("first", {})]) == [1]
        with recorded_statements(database) as seen:
            assert events.append(session.id, "t1", rows) == list(range(2, count + 2))
        uow.commit()
    assert _inserts(seen) == -(-count // 3)
    with database.reading() as uow:
        kept = uow.ledger.session_events.page(session.id, after=1)
    assert [(r.sequence, r.type, r.data) for r in kept] == [
        (n + 2, kind, data) for n, (kind, data) in enumerate(rows)
    ]


def test_sqlite_stores_the_data_as_the_json_text_core_binds(database: Database) -> None:
    """On SQLite the column holds text: the very text Core's JSON type would have bound."""
    if database.engine.dialect.name != "sqlite":
        pytest.skip("Postgres stores JSONB, which keeps no text")
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        uow.ledger.session_events.append(session.id, "t1", AWKWARD)
        stored = uow.connection.execute(
            text("SELECT data FROM session_events WHERE session_id = :s ORDER BY sequence"),
            {"s": session.id},
        ).scalars()
        assert list(stored) == [json.dumps(data) for _, data in AWKWARD]
        uow.commit()
