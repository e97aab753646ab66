"""Tasks dispatched to sessions the caller did not spawn as workers (`session_tasks`):
recorded with the dispatch, settled once when their answer goes back, listed per caller."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, and_, insert, select, update

from nexus.ids import Clock
from nexus.ledger.enums import TaskStatus
from nexus.ledger.records import NewTask, TaskListing, TaskRecord
from nexus.ledger.repository._sql import columns_for, past_key, to_record
from nexus.ledger.repository.tables import queue_items, tasks


class TaskRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def create(self, new: NewTask) -> TaskRecord:
        """Record the task (its event must be stored already); pending until it is answered."""
        now = self._clock()
        values = {
            **new.model_dump(),
            "task_status": TaskStatus.PENDING.value,
            "created_at": now,
            "updated_at": now,
        }
        self._conn.execute(insert(tasks).values(**values))
        return TaskRecord.model_validate(values)

    def for_events(self, event_ids: Sequence[str]) -> list[TaskRecord]:
        """The tasks these events carry, in the order of `event_ids` (unknown ones left out)."""
        ids = list(event_ids)
        if not ids:
            return []
        rows = self._conn.execute(
            select(*columns_for(tasks, TaskRecord)).where(tasks.c.event_id.in_(ids))
        )
        found = {row.event_id: to_record(TaskRecord, row) for row in rows}
        return [found[event_id] for event_id in ids if event_id in found]

    def settle(self, event_ids: Sequence[str], status: TaskStatus) -> list[str]:
        """Move the still pending of these tasks to `status` (once: a task is answered by
        the first turn that consumed it); the event ids that moved."""
        ids = list(event_ids)
        if not ids:
            return []
        moved = self._conn.execute(
            update(tasks)
            .where(tasks.c.event_id.in_(ids))
            .where(tasks.c.task_status == TaskStatus.PENDING.value)
            .values(task_status=status.value, updated_at=self._clock())
            .returning(tasks.c.event_id)
        )
        return [str(event_id) for event_id in moved.scalars()]

    def page(
        self, caller_label: str, *, after: tuple[int, str] | None, limit: int
    ) -> list[TaskListing]:
        """Up to `limit` of the tasks `caller_label` dispatched, oldest first (by creation,
        then event id), after the key `after`; each with its queue item's status."""
        query = (
            select(*columns_for(tasks, TaskRecord), queue_items.c.status.label("queue_status"))
            .select_from(
                tasks.outerjoin(
                    queue_items,
                    and_(
                        queue_items.c.event_id == tasks.c.event_id,
                        queue_items.c.session_id == tasks.c.session_id,
                    ),
                )
            )
            .where(tasks.c.caller_session_label == caller_label)
            .order_by(tasks.c.created_at, tasks.c.event_id)
        )
        if after is not None:
            query = query.where(past_key(tasks.c.created_at, tasks.c.event_id, after))
        listed = []
        for row in self._conn.execute(query.limit(limit)):
            values = dict(row._mapping)
            queue_status = values.pop("queue_status")
            listed.append(
                TaskListing(task=TaskRecord.model_validate(values), queue_status=queue_status)
            )
        return listed
