"""A session's kept stream events: appended with a turn's commit, read back in order.

Append-only by construction: this module is the only SQL that touches `session_events`,
and it only inserts and reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, func, insert, select

from nexus.ids import Clock, new_id
from nexus.ledger.repository._sql import to_record
from nexus.ledger.repository.tables import session_events

# Rows per INSERT: a long answer streams a few hundred coalesced deltas; this keeps one
# statement's parameters well inside every driver's limit (SQLite's is 32,766).
ROWS_PER_INSERT = 2_000


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
        sequences they got. One multi-row INSERT (a turn of very many, a few): the caller
        holds the session's row (the turn's compare-and-set), so nobody numbers between."""
        sequences: list[int] = []
        for start in range(0, len(events), ROWS_PER_INSERT):
            sequences.extend(
                self._insert(session_id, turn_id, events[start : start + ROWS_PER_INSERT])
            )
        return sequences

    def _insert(
        self, session_id: str, turn_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[int]:
        # The last number is read by the statement itself, once (a scalar subquery seen
        # before any of its rows, on both databases): no statement of its own.
        last = (
            select(func.coalesce(func.max(session_events.c.sequence), 0))
            .where(session_events.c.session_id == session_id)
            .scalar_subquery()
        )
        now = self._clock()
        rows = [
            {
                "id": new_id(),
                "session_id": session_id,
                "sequence": last + position,
                "type": event_type,
                "data": data,
                "turn_id": turn_id,
                "created_at": now,
            }
            for position, (event_type, data) in enumerate(events, start=1)
        ]
        found = self._conn.execute(
            insert(session_events).values(rows).returning(session_events.c.sequence)
        )
        return sorted(int(sequence) for (sequence,) in found)

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
