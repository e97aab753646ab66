"""Manager/worker bookkeeping: a worker's task status, the call that spawned it, and a
manager's workers with their activity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, func, select, update

from nexus.ids import Clock
from nexus.ledger.enums import CHAIN_STATUSES, TaskStatus
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository._sql import columns_for, past_key, to_record
from nexus.ledger.repository.tables import sessions, tool_calls, turns


@dataclass(frozen=True)
class Activity:
    """A session's own chain turns: how many, and when the newest started (None: none)."""

    turns: int
    last_turn_at: int | None


class WorkerRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def record_spawn(self, turn_id: str, provider_call_id: str, label: str) -> str | None:
        """Note on the dispatching tool call the worker it spawned; returns the call's ledger
        id (None: no such call). One statement: it replaces looking the id up."""
        found = self._conn.execute(
            update(tool_calls)
            .where(tool_calls.c.turn_id == turn_id)
            .where(tool_calls.c.provider_call_id == provider_call_id)
            .values(spawned_session_label=label)
            .returning(tool_calls.c.id)
        ).scalar_one_or_none()
        return None if found is None else str(found)

    def tool_call(self, turn_id: str, provider_call_id: str) -> str | None:
        """The ledger's id of the turn's call the model named `provider_call_id` (None: none)."""
        found = self._conn.execute(
            select(tool_calls.c.id)
            .where(tool_calls.c.turn_id == turn_id)
            .where(tool_calls.c.provider_call_id == provider_call_id)
        ).scalar_one_or_none()
        return None if found is None else str(found)

    def set_task_status(self, session_id: str, status: TaskStatus) -> bool:
        """Move a worker's task to `status`; False when it is no worker, is there already,
        or was cancelled (cancelled is final: a late answer does not undo it). A task that
        ends (completed, failed, cancelled) finishes its session then (`finished_at`)."""
        now = self._clock()
        ended = status in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)
        changed = self._conn.execute(
            update(sessions)
            .where(sessions.c.id == session_id)
            .where(sessions.c.task_status.is_not(None))
            .where(sessions.c.task_status.not_in([status.value, TaskStatus.CANCELLED.value]))
            .values(
                task_status=status.value,
                updated_at=now,
                finished_at=now if ended else sessions.c.finished_at,
            )
        )
        return bool(changed.rowcount)

    def page(
        self, parent_label: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[SessionRecord]:
        """Up to `limit` of the sessions `parent_label` spawned, oldest first (by creation,
        then label: the order of dispatch), after the key `after`."""
        query = (
            select(*columns_for(sessions, SessionRecord))
            .where(sessions.c.parent_session_label == parent_label)
            .order_by(sessions.c.created_at, sessions.c.label)
        )
        if after is not None:
            query = query.where(past_key(sessions.c.created_at, sessions.c.label, after))
        return [to_record(SessionRecord, row) for row in self._conn.execute(query.limit(limit))]

    def activity(self, session_ids: Sequence[str]) -> dict[str, Activity]:
        """Each session's chain turns (count and newest start), in one statement for a page."""
        ids = list(session_ids)
        found = {session_id: Activity(0, None) for session_id in ids}
        if not ids:
            return found
        rows = self._conn.execute(
            select(turns.c.session_id, func.count(), func.max(turns.c.started_at))
            .where(turns.c.session_id.in_(ids), turns.c.status.in_(CHAIN_STATUSES))
            .group_by(turns.c.session_id)
        ).all()
        for session_id, count, last in rows:
            found[session_id] = Activity(int(count), None if last is None else int(last))
        return found
