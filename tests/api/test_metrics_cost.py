"""A /metrics scrape costs the same on a ledger of 1,000 rows per table as on one of
100,000: it reads the counts the ledger keeps, never the ledger's tables. Work is counted
by Postgres itself (rows each table handed out, pg_stat_user_tables), not timed."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, text

from nexus.db import Database
from nexus.ledger.repository import Ledger
from tests.support import new_session

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
LEDGER_TABLES = ("events", "queue_items", "turns", "deliveries")
BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0)
SERIES = "generate_series(CAST(:start AS integer), CAST(:stop AS integer)) g"


def _grow(connection: Connection, session_id: str, start: int, stop: int) -> None:
    """Rows `start`..`stop - 1` in every counted table, straight in SQL (the triggers count
    them as they would any row)."""
    rows = {"start": start, "stop": stop - 1, "session": session_id}
    connection.execute(
        text(
            "INSERT INTO events (id, adapter, platform, direction, kind, attachments, "
            "occurred_at, received_at, payload, status, disposition) "
            "SELECT 'bulk:' || g, 'telegram', 'telegram', 'inbound', 'message', '[]', 0, 0, "
            "'{}', 'processed', 'queued' FROM " + SERIES
        ),
        rows,
    )
    connection.execute(
        text(
            "INSERT INTO turns (id, session_id, turn_type, status, epoch, started_at, "
            "completed_at) SELECT lpad(g::text, 26, '0'), :session, 'normal', 'failed', 1, 0, "
            "(g % 7) * 400 FROM " + SERIES
        ),
        rows,
    )
    connection.execute(
        text(
            "INSERT INTO queue_items (id, session_id, mode, priority, payload, status, "
            "attempts, available_at, disposition, enqueued_at, updated_at) "
            "SELECT lpad(g::text, 26, '0'), :session, 'queue', 0, '{}', 'done', 1, 0, "
            "'consumed', 0, 0 FROM " + SERIES
        ),
        rows,
    )
    connection.execute(
        text(
            "INSERT INTO deliveries (id, turn_id, chunk_index, session_id, platform, target, "
            "text, status, attempts, created_at, updated_at) "
            "SELECT lpad(g::text, 26, '0'), lpad(g::text, 26, '0'), 0, :session, 'telegram', "
            "'{}', 'x', 'sent', 1, 0, 0 FROM " + SERIES
        ),
        rows,
    )


def _a_few_changes(connection: Connection, round_: int) -> None:
    """The same small amount of traffic between two scrapes, whatever the ledger's size:
    five events arrive and five are processed."""
    connection.execute(
        text(
            "INSERT INTO events (id, adapter, platform, direction, kind, attachments, "
            "occurred_at, received_at, payload, status) SELECT 'new:' || :round || ':' || g, "
            "'slack', 'slack', 'inbound', 'message', '[]', 0, 0, '{}', 'received' "
            "FROM generate_series(1, 5) g"
        ),
        {"round": round_},
    )
    connection.execute(
        text(
            "UPDATE events SET status = 'processed', disposition = 'queued' "
            "WHERE id IN (SELECT 'new:' || :round || ':' || g FROM generate_series(1, 5) g)"
        ),
        {"round": round_},
    )


def _rows_read(connection: Connection) -> dict[str, int]:
    """Rows each table has handed out (sequential and index fetches) since it was created,
    this backend's own pending counts flushed first."""
    connection.execute(text("SELECT pg_stat_force_next_flush()"))
    connection.commit()  # idle: the backend flushes its counts now
    connection.execute(text("SELECT pg_stat_clear_snapshot()"))
    found = connection.execute(
        text(
            "SELECT relname, COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) "
            "FROM pg_stat_user_tables"
        )
    ).all()
    connection.commit()
    return {str(name): int(count) for name, count in found}


def _scrape_work(database: Database, round_: int) -> dict[str, int]:
    """Rows read per table by one scrape that follows a few changes."""
    with database.engine.connect() as connection:
        _a_few_changes(connection, round_)
        connection.commit()
        before = _rows_read(connection)
        Ledger(connection).metrics.figures(BUCKETS)
        connection.commit()
        after = _rows_read(connection)
    return {
        name: after[name] - before.get(name, 0)
        for name in after
        if after[name] > before.get(name, 0)
    }


def test_a_scrape_reads_the_same_rows_at_1k_and_at_100k_and_none_of_the_ledgers(
    pg_database: Database,
) -> None:
    with pg_database.unit_of_work() as uow:
        session = new_session(uow.ledger, "bulk")
        uow.commit()
    with pg_database.engine.begin() as connection:
        _grow(connection, session.id, 0, 1_000)
    with pg_database.unit_of_work() as uow:
        uow.ledger.metrics.figures(BUCKETS)  # folds the bulk load once
        uow.commit()
    _scrape_work(pg_database, 0)  # the labels of the traffic below now have their totals
    small = _scrape_work(pg_database, 1)

    with pg_database.engine.begin() as connection:
        _grow(connection, session.id, 1_000, 100_000)
    with pg_database.unit_of_work() as uow:
        figures = uow.ledger.metrics.figures(BUCKETS)
        uow.commit()
    assert ("inbound", "telegram", "queued", 100_000) in figures.events
    assert ("failed", 100_000) in figures.turns and figures.turn_latency_count == 100_000
    assert figures.dispositions == [("consumed", 100_000)]
    assert figures.deliveries == [("telegram", "sent", 100_000)]
    large = _scrape_work(pg_database, 2)

    assert small == large, (small, large)
    assert not set(small) & set(LEDGER_TABLES), small
    # The deltas of 5 arrivals and 5 updates (15 rows), and the totals it wrote.
    assert small.get("metric_deltas", 0) <= 15 and sum(small.values()) <= 40, small
