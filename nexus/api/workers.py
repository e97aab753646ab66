"""/v1/sessions/{label}/workers and /cancel: a manager's workers with their task status,
and cancelling one."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from pydantic import BaseModel

from nexus.agents.dispatched import WORKER, Dispatched, dispatched_worker
from nexus.api.deps import CoordinationDep, DatabaseDep, DoorbellDep, v1_router
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.ledger.records import SessionLabel, SessionRecord
from nexus.ledger.repository.workers import Activity
from nexus.sessions import service as sessions

router = v1_router("/v1/sessions", "sessions", 404, 409)


class WorkerView(BaseModel):
    """One worker of a manager, or one task it sent to another session: the task, where it
    stands, and the serving session's activity."""

    label: str
    task_description: str | None
    task_status: str | None  # pending, running, completed, failed or cancelled
    status: str  # the session's own: a cancelled worker is archived
    parent_turn_id: str | None
    spawn_tool_call_id: str | None
    turns: int
    created_at: int
    last_turn_at: int | None
    # "worker" (spawned), or a tracked task's "session" (an existing one) or "fork".
    kind: str = WORKER
    task_id: str | None = None  # a tracked task's event id

    @classmethod
    def of(cls, worker: SessionRecord, activity: Activity) -> WorkerView:
        return cls.entry(dispatched_worker(worker), activity)

    @classmethod
    def entry(cls, entry: Dispatched, activity: Activity) -> WorkerView:
        return cls(
            label=entry.session.label,
            task_description=entry.task_description,
            task_status=entry.task_status,
            status=entry.session.status,
            parent_turn_id=entry.parent_turn_id,
            spawn_tool_call_id=entry.spawn_tool_call_id,
            turns=activity.turns,
            created_at=entry.created_at,
            last_turn_at=activity.last_turn_at,
            kind=entry.kind,
            task_id=entry.task_id,
        )


class CancelledWorker(BaseModel):
    worker: WorkerView
    cancelled_items: list[str]  # the waiting queue items dropped (disposition `cancelled`)
    abort_requested: bool  # a running turn was asked to stop
    already_cancelled: bool


@router.get("/{label:path}/workers")
def list_workers(
    label: SessionLabel, database: DatabaseDep, page: Annotated[PageRequest, Depends(page_request)]
) -> Page[WorkerView]:
    """The workers `label` dispatched and the tasks it sent to other sessions and forks,
    oldest first, with their task status."""
    after = decode_cursor(page.cursor, [int, int, str])
    key = (int(after[0]), int(after[1]), str(after[2])) if after else None
    with database.unit_of_work() as uow:
        rows, activity = sessions.list_workers(uow, label, after=key, limit=page.limit + 1)
    return page_body(
        rows, page.limit, lambda d: d.key, lambda d: WorkerView.entry(d, activity[d.session.id])
    )


@router.post("/{label:path}/cancel")
def cancel(
    label: SessionLabel, database: DatabaseDep, doorbell: DoorbellDep, coordination: CoordinationDep
) -> CancelledWorker:
    """Cancel a worker: its waiting input is dropped, a running turn is asked to abort, its
    task becomes `cancelled` and its parent is told; it takes no new messages (409).
    Cancelling again changes nothing; a session that is no worker is 409."""
    with database.unit_of_work() as uow:
        cancelled = sessions.cancel_worker_of(uow, coordination, doorbell, label)
    done = cancelled.done
    return CancelledWorker(
        worker=WorkerView.of(done.worker, cancelled.activity),
        cancelled_items=done.dropped,
        abort_requested=not done.already,
        already_cancelled=done.already,
    )
