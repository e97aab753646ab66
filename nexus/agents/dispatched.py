"""What an agent dispatched, as one list: the workers it spawned and the tasks it sent to
other sessions (or forks), oldest first, each with where its task stands."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from nexus.ledger.enums import QueueStatus, TaskStatus
from nexus.ledger.records import SessionRecord, TaskListing
from nexus.ledger.repository import Ledger

WORKER = "worker"
# The sort key's middle part: at the same instant, spawned workers before tracked tasks.
_WORKER_RANK, _TASK_RANK = 0, 1
# (created_at, rank, label or event id): the order of the list, and its cursor.
DispatchKey = tuple[int, int, str]

# A tracked task still pending in the ledger reads as its queue item stands.
_FROM_QUEUE = {
    QueueStatus.CLAIMED.value: TaskStatus.RUNNING.value,
    QueueStatus.DROPPED.value: TaskStatus.CANCELLED.value,
    QueueStatus.DEAD.value: TaskStatus.FAILED.value,
}


def task_status(stored: str, queue_status: str | None) -> str:
    """Where a tracked task stands: what was settled when its answer (or failure) went
    back, else what its queue item says (claimed: running; dropped: cancelled; dead:
    failed; waiting: pending)."""
    if stored != TaskStatus.PENDING.value or queue_status is None:
        return stored
    return _FROM_QUEUE.get(queue_status, stored)


@dataclass(frozen=True)
class Dispatched:
    """One entry: the session doing the work and the task it was given."""

    kind: str  # "worker" (spawned), "session" (an existing one) or "fork"
    session: SessionRecord
    task_id: str | None  # a tracked task's event id; None for a spawned worker
    task_description: str | None
    task_status: str | None
    parent_turn_id: str | None  # the dispatching turn
    spawn_tool_call_id: str | None  # the dispatching tool call
    created_at: int

    @property
    def key(self) -> DispatchKey:
        if self.task_id is None:
            return (self.created_at, _WORKER_RANK, self.session.label)
        return (self.created_at, _TASK_RANK, self.task_id)


def dispatched_worker(session: SessionRecord) -> Dispatched:
    return Dispatched(
        kind=WORKER,
        session=session,
        task_id=None,
        task_description=session.task_description,
        task_status=session.task_status,
        parent_turn_id=session.parent_turn_id,
        spawn_tool_call_id=session.spawn_tool_call_id,
        created_at=session.created_at,
    )


def _task(listing: TaskListing, session: SessionRecord) -> Dispatched:
    task = listing.task
    return Dispatched(
        kind=task.kind.value,
        session=session,
        task_id=task.event_id,
        task_description=task.description,
        task_status=task_status(task.task_status, listing.queue_status),
        parent_turn_id=task.caller_turn_id,
        spawn_tool_call_id=task.tool_call_id,
        created_at=task.created_at,
    )


def _after(cursor: DispatchKey | None, rank: int) -> tuple[int, str] | None:
    """The cursor as one source's own (created_at, key) keyset bound: entries of a rank
    before the cursor's are after it from the same instant on, those of a later rank only
    from the next instant."""
    if cursor is None:
        return None
    created, cursor_rank, key = cursor
    if rank == cursor_rank:
        return (created, key)
    # Every key is longer than "": (created, "") admits the whole instant `created`.
    return (created, "") if rank > cursor_rank else (created + 1, "")


def dispatched_page(
    ledger: Ledger, caller_label: str, *, after: DispatchKey | None, limit: int
) -> list[Dispatched]:
    """Up to `limit` entries of what `caller_label` dispatched, after the key `after`."""
    workers = ledger.workers.page(caller_label, after=_after(after, _WORKER_RANK), limit=limit)
    listings = ledger.tasks.page(caller_label, after=_after(after, _TASK_RANK), limit=limit)
    serving = ledger.sessions.get_many([listing.task.session_id for listing in listings])
    tasks = [
        _task(listing, serving[listing.task.session_id])
        for listing in listings
        if listing.task.session_id in serving
    ]
    # Each source comes in its own order (the database's); merged by instant and rank.
    merged = heapq.merge(
        [dispatched_worker(session) for session in workers], tasks, key=lambda d: d.key[:2]
    )
    return list(merged)[:limit]
