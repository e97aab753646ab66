"""Cancelling a worker: its waiting input dropped, its task cancelled, the session archived
so it takes no new work, and its parent told; the caller asks a running turn to abort."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.agents.results import announce_cancel, is_task_event, settle_tasks
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import Disposition, QueueStatus, SessionStatus, TaskStatus
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository import LedgerError, NotFound

CANCELLED_DETAIL = "the worker was cancelled"


class NotAWorker(LedgerError):
    """Only a worker session (one a manager dispatched) has a task to cancel."""


@dataclass(frozen=True)
class Cancelled:
    worker: SessionRecord
    dropped: list[str]  # the waiting queue items cancelled
    already: bool  # it was cancelled before: nothing changed


def cancel_worker(uow: UnitOfWork, doorbell: Doorbell | None, label: str) -> Cancelled:
    """Cancel the worker `label` (aliases followed); the caller commits. Cancelling twice
    changes nothing the second time. Raises NotFound, or NotAWorker for any other session."""
    worker = uow.ledger.sessions.resolve(label)
    if worker is None:
        raise NotFound(f"no session labelled {label!r}")
    if not worker.is_subagent:
        raise NotAWorker(
            f"session {worker.label!r} is not a worker (no manager dispatched it), so it has "
            "no task to cancel; to stop its running turn, abort it instead"
        )
    if worker.task_status == TaskStatus.CANCELLED:
        return Cancelled(worker, [], already=True)
    # Under the session's row lock: no router queues behind our back meanwhile.
    uow.ledger.sessions.lock(worker.id)
    waiting = uow.ledger.queue.for_session(worker.id, statuses=[QueueStatus.QUEUED])
    dropped = [item.id for item in waiting]
    if dropped:
        uow.ledger.queue.dispose(
            dropped,
            status=QueueStatus.DROPPED,
            disposition=Disposition.CANCELLED,
            detail=CANCELLED_DETAIL,
            only_waiting=True,
        )
    # Tasks other agents sent it go unanswered now: their callers are told so.
    tasks = [i.event_id for i in waiting if i.event_id and is_task_event(i.event_id)]
    if tasks:
        settle_tasks(uow, doorbell, worker, tasks, "stopped by an operator", TaskStatus.CANCELLED)
    uow.ledger.workers.set_task_status(worker.id, TaskStatus.CANCELLED)
    archived = uow.ledger.sessions.configure(worker.id, {"status": SessionStatus.ARCHIVED})
    announce_cancel(uow, doorbell, archived)
    return Cancelled(archived, dropped, already=False)
