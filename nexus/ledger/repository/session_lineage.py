"""Where sessions branch and how their heads moved: the reads a tree view draws from."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, func, select

from nexus.ledger.enums import CHAIN_STATUSES
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository._sql import columns_for, to_record
from nexus.ledger.repository.sessions_sql import SESSION_BY_ID
from nexus.ledger.repository.tables import history, sessions, turns

# The pointer history's reason for a head moved back to an earlier turn of its chain.
ROLLBACK = "rollback"


class SessionLineage:
    """The lineage reads of the session repository (`uow.ledger.sessions`): forks, workers,
    rollbacks and the pointer history."""

    _conn: Connection

    def headed_by(self, turn_id: str) -> SessionRecord | None:
        """The oldest session whose head is `turn_id` (several may be, after forks)."""
        row = self._conn.execute(
            select(*columns_for(sessions, SessionRecord))
            .where(sessions.c.thread_id == turn_id)
            .order_by(sessions.c.created_at, sessions.c.id)
            .limit(1)
        ).one_or_none()
        return None if row is None else to_record(SessionRecord, row)

    def branches_from(self, turn_ids: Sequence[str]) -> list[tuple[str, str, SessionRecord]]:
        """(turn id, "worker" | "fork", session) for sessions spawned at or forked from these
        turns: the links a tree view draws."""
        ids = list(turn_ids)
        if not ids:
            return []
        found: list[tuple[str, str, SessionRecord]] = []
        workers = self._conn.execute(
            select(*columns_for(sessions, SessionRecord))
            .where(sessions.c.parent_turn_id.in_(ids))
            .order_by(sessions.c.created_at, sessions.c.id)
        )
        for row in workers:
            record = to_record(SessionRecord, row)
            found.append((record.parent_turn_id or "", "worker", record))
        forks = self._conn.execute(
            select(history.c.thread_id, history.c.session_id)
            .where(history.c.reason == "fork")
            .where(history.c.thread_id.in_(ids))
            .order_by(history.c.changed_at)
        ).all()
        for turn_id, session_id in forks:
            fork = self._conn.execute(SESSION_BY_ID, {"session_id": session_id}).one_or_none()
            if fork is not None:
                found.append((turn_id, "fork", to_record(SessionRecord, fork)))
        return found

    def rollbacks(self, session_id: str) -> list[tuple[str, str]]:
        """(turn rolled back to, head abandoned there) for each rollback of the session,
        oldest first: the branches a tree view keeps readable."""
        rows = self._conn.execute(
            select(history.c.thread_id, history.c.previous_thread_id)
            .where(history.c.session_id == session_id, history.c.reason == ROLLBACK)
            .order_by(history.c.changed_at, history.c.id)
        ).all()
        return [(str(row.thread_id), str(row.previous_thread_id)) for row in rows]

    def turn_count(self, session_id: str) -> int:
        """How many turns this session's own chain holds (a fork's inherited ones excluded)."""
        return int(
            self._conn.execute(
                select(func.count())
                .select_from(turns)
                .where(turns.c.session_id == session_id, turns.c.status.in_(CHAIN_STATUSES))
                .where(turns.c.abandoned_at.is_(None))
            ).scalar_one()
        )

    def history(self, session_id: str) -> list[tuple[str | None, str | None, int, str]]:
        """Pointer moves, oldest first: (previous head, new head, epoch, reason)."""
        rows = self._conn.execute(
            select(
                history.c.previous_thread_id,
                history.c.thread_id,
                history.c.epoch,
                history.c.reason,
            )
            .where(history.c.session_id == session_id)
            .order_by(history.c.changed_at, history.c.id)
        ).all()
        return [(r.previous_thread_id, r.thread_id, r.epoch, r.reason) for r in rows]
