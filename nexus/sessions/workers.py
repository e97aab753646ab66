"""A manager's workers and the tasks it sent to other sessions and forks, with their
activity, and cancelling a worker."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from nexus.agents.cancel import Cancelled, cancel_worker
from nexus.agents.dispatched import Dispatched, DispatchKey, dispatched_page
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.stream_events import QUEUE_ITEM_DROPPED
from nexus.ledger.repository.workers import Activity
from nexus.queueing.coordination import Coordination
from nexus.sessions.entries import get


def list_workers(
    uow: UnitOfWork, label: str, *, after: DispatchKey | None, limit: int
) -> tuple[list[Dispatched], dict[str, Activity]]:
    """Up to `limit` entries of what the live session `label` dispatched, oldest first,
    after the key `after`, and each serving session's activity."""
    manager = get(uow, label)
    rows = dispatched_page(uow.ledger, manager.label, after=after, limit=limit)
    return rows, uow.ledger.workers.activity([row.session.id for row in rows])


@dataclass(frozen=True)
class WorkerCancelled:
    done: Cancelled
    activity: Activity


def cancel_worker_of(
    uow: UnitOfWork, coordination: Coordination, doorbell: Doorbell | None, label: str
) -> WorkerCancelled:
    """Cancel the worker `label`: its waiting input dropped (each announced on its stream),
    a running turn asked to abort, its parent told; commits. NotFound, NotAWorker;
    cancelling again changes nothing."""
    done = cancel_worker(uow, doorbell, label)
    worker = done.worker
    for item_id in done.dropped:
        dropped = {"queue_item_id": item_id, "disposition": "cancelled", "reason": "cancelled"}
        uow.after_commit(partial(coordination.publish, worker.id, QUEUE_ITEM_DROPPED, dropped))
    if not done.already:
        # Read under the worker's row lock: its running turn stops, and it takes no more.
        uow.after_commit(partial(coordination.request_abort, worker.id, epoch=worker.epoch))
    activity = uow.ledger.workers.activity([worker.id])[worker.id]
    uow.commit()
    return WorkerCancelled(done, activity)
