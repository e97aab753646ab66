"""Hooks' event search: full-text, through an index on both databases, the same answers on
both (newest first, at most the limit), and no statement added to storing an event."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from nexus.db import Database
from nexus.ledger.records import EventDraft
from nexus.ledger.repository.event_search import search_words
from tests.support import FakeClock


def _store(database: Database, clock: FakeClock, *texts: str | None, **fields: Any) -> list[str]:
    ids = []
    with database.unit_of_work() as uow:
        for text in texts:
            clock.advance(1000)
            event_id = f"api:{clock.now}"
            draft = EventDraft(
                id=event_id,
                adapter="api",
                platform="api",
                text=text,
                occurred_at=clock.now,
                **fields,
            )
            assert uow.ledger.events.insert(draft)
            ids.append(event_id)
        uow.commit()
    return ids


def _search(database: Database, query: str, limit: int = 10) -> list[str]:
    with database.reading() as uow:
        return [found.id for found in uow.ledger.events.search(query, limit=limit)]


def test_any_word_matches_as_a_word_prefix_newest_first(
    database: Database, clock: FakeClock
) -> None:
    old, lunch, new, other = _store(
        database,
        clock,
        "The ACME Invoice is attached",
        "lunch at noon?",
        "two invoices, both overdue",
        "Überweisung: 250000 received",
    )
    assert _search(database, "invoice") == [new, old]  # "invoices" starts with "invoice"
    assert _search(database, "INVOICE lunch") == [new, lunch, old]
    assert _search(database, "invoice", limit=1) == [new]
    assert _search(database, "250000") == [other]
    assert _search(database, "überweisung") == [other]
    assert _search(database, "voice") == []  # a word's prefix, not any substring
    assert _search(database, "a ! ?") == []  # no word of two characters or more


def test_only_inbound_events_with_text_are_found(database: Database, clock: FakeClock) -> None:
    (inbound,) = _store(database, clock, "invoice from ACME")
    _store(database, clock, "invoice sent back", direction="outbound")
    _store(database, clock, None)
    assert _search(database, "invoice") == [inbound]


def test_query_syntax_is_only_ever_words(database: Database, clock: FakeClock) -> None:
    (found,) = _store(database, clock, "deploy at noon")
    for hostile in ['deploy" OR "x', "deploy:* | !", "deploy) AND (NOT", 'NEAR("deploy")*']:
        assert _search(database, hostile) == [found]


def test_words_are_letters_and_digits_lower_cased_first_eight() -> None:
    assert search_words("Re: Invoice #42 — a b c2 invoice") == ["re", "invoice", "42", "c2"]
    assert len(search_words(" ".join(f"w{n}" for n in range(20)))) == 8


def test_storing_an_event_is_still_one_statement(database: Database, clock: FakeClock) -> None:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(database.engine, "before_cursor_execute", count)
    try:
        _store(database, clock, "invoice of the month")
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    assert len(inserts) == 1 and "events_fts" not in inserts[0]
    assert len(_search(database, "month")) == 1  # indexed by the same statement


def _captured_search(database: Database, query: str) -> tuple[str, Any]:
    """The statement and parameters a search sends to the driver."""
    seen: list[tuple[str, Any]] = []

    def capture(*args: Any) -> None:
        seen.append((args[2], args[3]))

    event.listen(database.engine, "before_cursor_execute", capture)
    try:
        _search(database, query)
    finally:
        event.remove(database.engine, "before_cursor_execute", capture)
    return seen[-1]


@pytest.mark.parametrize("words", ["invoice", "invoice lunch"])
def test_the_search_reads_the_index(database: Database, clock: FakeClock, words: str) -> None:
    _store(database, clock, *(f"message {n} about invoice {n}" for n in range(200)))
    statement, parameters = _captured_search(database, words)
    with database.engine.connect() as connection:
        if database.dialect == "sqlite":
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            details = " | ".join(str(row[-1]) for row in plan)
            # The match comes from the FTS5 index; each event by its primary key.
            assert "SCAN events_fts VIRTUAL TABLE INDEX" in details, details
            assert "USING INDEX sqlite_autoindex_events_1 (id=?)" in details, details
        else:
            connection.exec_driver_sql("SET enable_seqscan = off")
            plan = connection.exec_driver_sql(f"EXPLAIN {statement}", parameters)
            details = "\n".join(str(row[0]) for row in plan)
            assert "ix_events_search" in details, details
            connection.rollback()
