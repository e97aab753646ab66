"""A worker's result always reaches its parent as a durable `worker_result` queue item."""

from __future__ import annotations

from collections.abc import Sequence

from nexus.agents.posting import post
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.outcomes import CommitHook
from nexus.engine.turn import TurnResult
from nexus.ledger.enums import MessageRole, TaskStatus, TurnStatus
from nexus.ledger.records import EventRecord, SessionRecord

WORKER_RESULT = "worker_result"


# How the parent reads each outcome: "[worker_result] worker:… reports: …".
_VERDICTS = {
    TaskStatus.COMPLETED: "reports",
    TaskStatus.FAILED: "failed",
    TaskStatus.CANCELLED: "was cancelled",
}


def result_event_id(turn_or_item_id: str) -> str:
    return f"{WORKER_RESULT}:{turn_or_item_id}"


def deliver(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    worker: SessionRecord,
    key: str,
    text: str,
    *,
    failed: bool = False,
    lineage: Sequence[str] = (),
) -> bool:
    """Queue `text` as the worker's result to its parent (once per `key`); the worker's task
    is completed, or failed, in the same commit (a cancelled one stays cancelled).
    `lineage`: the hooks whose firings caused the work it answers (`post`)."""
    if not worker.is_subagent:
        return False
    status = TaskStatus.FAILED if failed else TaskStatus.COMPLETED
    uow.ledger.workers.set_task_status(worker.id, status)
    return _post_result(uow, doorbell, worker, key, text, status, lineage=lineage)


def announce_cancel(uow: UnitOfWork, doorbell: Doorbell | None, worker: SessionRecord) -> bool:
    """Tell the parent its worker was cancelled, so a manager waiting on it does not wait on."""
    key, why = f"cancel:{worker.id}", "stopped by an operator"
    return _post_result(uow, doorbell, worker, key, why, TaskStatus.CANCELLED)


def _post_result(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    worker: SessionRecord,
    key: str,
    text: str,
    status: TaskStatus,
    *,
    lineage: Sequence[str] = (),
) -> bool:
    if worker.parent_session_label is None:
        return False
    parent = uow.ledger.sessions.resolve(worker.parent_session_label)
    if parent is None:
        return False
    return post(
        uow,
        doorbell,
        session_id=parent.id,
        event_id=result_event_id(key),
        text=f"[{WORKER_RESULT}] {worker.label} {_VERDICTS[status]}: {text}",
        payload={
            "kind": WORKER_RESULT,
            "worker": worker.label,
            "failed": status != TaskStatus.COMPLETED,
            "task_status": status.value,
        },
        lineage=lineage,
    )


def worker_result_hook(doorbell: Doorbell | None) -> CommitHook:
    """The engine commit hook: after a worker's turn, its final answer goes to the parent
    (unless the turn already called reply_to_caller: same event id, posted once)."""

    def hook(
        uow: UnitOfWork,
        session: SessionRecord,
        turn_id: str,
        result: TurnResult,
        _source: EventRecord | None,
    ) -> None:
        if not session.is_subagent or result.status != TurnStatus.COMPLETED:
            return
        answers = [
            m.content.get("text", "")
            for m in result.messages
            if m.role == MessageRole.ASSISTANT and not m.content.get("partial")
        ]
        deliver(
            uow,
            doorbell,
            session,
            turn_id,
            answers[-1] if answers else "(no answer)",
            lineage=uow.ledger.events.hook_lineage(turn_id=turn_id),
        )

    return hook
