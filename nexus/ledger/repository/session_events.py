"""A session's kept stream events: appended with a turn's commit, read back in order.

Append-only by construction: this module is the only SQL that touches `session_events`,
and it only inserts and reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Executable,
    String,
    bindparam,
    cast,
    func,
    insert,
    literal_column,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB

from nexus.ids import Clock, new_id
from nexus.ledger.repository import driver
from nexus.ledger.repository._sql import to_record
from nexus.ledger.repository.dialect_sql import PerDialect
from nexus.ledger.repository.tables import session_events

# Rows per INSERT: a long answer streams a few hundred coalesced deltas. The statement's
# parameters are the same few for any number of rows; this bounds the size of one of them.
ROWS_PER_INSERT = 2_000

# -- the append: one statement for any number of rows, built once per dialect ---------------
# A turn's rows arrive as one parameter, a JSON array of [id, type, data] rows, which the
# statement spreads into rows: its text never changes with their number, so it is compiled
# once, executed straight on the driver (repository/driver.py) and prepared by psycopg 3 on
# the server. Each row's number is the session's last one (read by the statement itself,
# once, before any of its rows) plus its position; what all rows share is one parameter.
# (Parallel arrays unnested, as the turn commit's messages are, took ~1.7 times as long on
# Postgres for a turn's few rows: one JSONB parameter is bound and parsed at once.)
_COLUMNS = ["id", "session_id", "sequence", "type", "data", "turn_id", "created_at"]
# Untyped: on psycopg 3 a typed parameter is rendered `::VARCHAR`, and cast twice.
_ROWS: BindParameter[str] = bindparam("rows")
_SESSION = bindparam("session_id", type_=String)
_TURN = bindparam("turn_id", type_=String)
_NOW = bindparam("now", type_=session_events.c.created_at.type)
# A scalar subquery, evaluated once: joined as a derived table, SQLite's aggregate would
# scan the session's rows rather than read the index's last entry.
_LAST = func.coalesce(
    select(func.max(session_events.c.sequence))
    .where(session_events.c.session_id == _SESSION)
    .scalar_subquery(),
    literal_column("0"),
)


def _append(rows: Any, field: Callable[[int], Any], position: ColumnElement[Any]) -> Executable:
    values = select(field(0), _SESSION, _LAST + position, field(1), field(2), _TURN, _NOW)
    return (
        insert(session_events)
        .from_select(_COLUMNS, values.select_from(rows))
        .returning(session_events.c.sequence)
    )


def _postgres_append() -> Executable:
    """The rows' JSONB array, spread by `jsonb_array_elements` with each one's position."""
    rows = (
        func.jsonb_array_elements(cast(_ROWS, JSONB))
        .table_valued("value", with_ordinality="position")
        .render_derived(name="new_rows")
    )

    def field(index: int) -> Any:
        # The id and the type as text; the data as the JSONB it is.
        operator = "->" if index == 2 else "->>"
        return rows.c.value.op(operator)(literal_column(str(index)))

    return _append(rows, field, rows.c.position)


def _sqlite_append() -> Executable:
    """The rows' JSON array, spread by `json_each` (whose `key` is a row's index). Each
    row's data comes as JSON text inside the array, and is stored as that very text, as
    Core would have bound it."""
    rows = func.json_each(_ROWS).table_valued("key", "value")

    def field(index: int) -> Any:
        return func.json_extract(rows.c.value, literal_column(f"'$[{index}]'"))

    return _append(rows, field, rows.c.key + literal_column("1"))


_APPEND = PerDialect(
    lambda connection: (
        _postgres_append() if connection.dialect.name == "postgresql" else _sqlite_append()
    )
)


class SessionEventRecord(BaseModel):
    """One kept stream event."""

    model_config = ConfigDict(frozen=True)

    id: str
    session_id: str
    sequence: int
    type: str
    data: dict[str, Any]
    turn_id: str | None
    created_at: int


class SessionEventRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def append(
        self, session_id: str, turn_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[int]:
        """Append a turn's events (type, data), in order, after the session's last one; the
        sequences they got. One INSERT (a turn of very many, a few): the caller holds the
        session's row (the turn's compare-and-set), so nobody numbers between."""
        sequences: list[int] = []
        for start in range(0, len(events), ROWS_PER_INSERT):
            sequences.extend(
                self._insert(session_id, turn_id, events[start : start + ROWS_PER_INSERT])
            )
        return sequences

    def _insert(
        self, session_id: str, turn_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[int]:
        postgres = self._conn.dialect.name == "postgresql"
        rows = [
            # SQLite stores a row's data as JSON text; Postgres parses the array as JSONB.
            [new_id(), event_type, data if postgres else json.dumps(data)]
            for event_type, data in events
        ]
        params = {
            "rows": json.dumps(rows),
            "session_id": session_id,
            "turn_id": turn_id,
            "now": self._clock(),
        }
        found = driver.column(self._conn, _APPEND(self._conn), params)
        return sorted(int(sequence) for sequence in found)

    def page(
        self, session_id: str, *, after: int = 0, limit: int = 200
    ) -> list[SessionEventRecord]:
        """The session's events with a sequence above `after`, oldest first."""
        found = self._conn.execute(
            select(session_events)
            .where(session_events.c.session_id == session_id)
            .where(session_events.c.sequence > after)
            .order_by(session_events.c.sequence)
            .limit(limit)
        )
        return [to_record(SessionEventRecord, row) for row in found]

    def last_sequence(self, session_id: str) -> int:
        """The session's newest sequence (0 when it has none)."""
        found = self._conn.execute(
            select(func.coalesce(func.max(session_events.c.sequence), 0)).where(
                session_events.c.session_id == session_id
            )
        ).scalar_one()
        return int(found)

    def sequence_of(self, session_id: str, event_id: str) -> int | None:
        """The sequence of the session's event `event_id` (None: no such event there)."""
        found = self._conn.execute(
            select(session_events.c.sequence).where(
                session_events.c.session_id == session_id, session_events.c.id == event_id
            )
        ).scalar_one_or_none()
        return None if found is None else int(found)

    def turn_span(self, session_id: str, turn_id: str) -> tuple[int, int] | None:
        """The first and last sequence of a turn's events (None: the ledger has none)."""
        first, last = self._conn.execute(
            select(func.min(session_events.c.sequence), func.max(session_events.c.sequence))
            .where(session_events.c.session_id == session_id)
            .where(session_events.c.turn_id == turn_id)
        ).one()
        return None if first is None else (int(first), int(last))
