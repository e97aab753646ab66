"""A worker's result always reaches its parent as a durable `worker_result` queue item."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nexus.agents.posting import post
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.outcomes import CommitHook
from nexus.engine.turn import TurnResult
from nexus.ledger.enums import MessageRole, TaskStatus, TurnStatus
from nexus.ledger.records import EventRecord, SessionRecord

WORKER_RESULT = "worker_result"
# The id of an event that carries a tracked task (agent_send to a session or a fork) starts
# so: a turn's hook knows from its inputs alone whether it owes a caller an answer.
TASK_EVENT_PREFIX = "agent-task:"


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
    is completed, or failed, in the same commit (a cancelled one stays cancelled)."""
    if not worker.is_subagent:
        return False
    status = TaskStatus.FAILED if failed else TaskStatus.COMPLETED
    uow.ledger.workers.set_task_status(worker.id, status)
    return _post_result(uow, doorbell, worker, key, text, status, lineage=lineage)


def report_dead(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    session: SessionRecord,
    key: str,
    cause: str,
    event_ids: list[str | None],
    *,
    lineage: Sequence[str] = (),
) -> None:
    """Inputs of `session` were dead-lettered: the tracked tasks among them fail and their
    callers are told; a worker's parent hears of it too (once, if it is one of them)."""
    tasks = [event_id for event_id in event_ids if event_id and is_task_event(event_id)]
    told = (
        settle_tasks(uow, doorbell, session, tasks, cause, TaskStatus.FAILED, lineage=lineage)
        if tasks
        else set()
    )
    if session.is_subagent and session.parent_session_label in told:
        uow.ledger.workers.set_task_status(session.id, TaskStatus.FAILED)
        return
    deliver(uow, doorbell, session, key, cause, failed=True, lineage=lineage)


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
    return _post_to(
        uow,
        doorbell,
        worker.parent_session_label,
        worker.label,
        key,
        text,
        status,
        lineage=lineage,
    )


def _post_to(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    caller_label: str,
    worker_label: str,
    key: str,
    text: str,
    status: TaskStatus,
    *,
    task: str | None = None,
    lineage: Sequence[str] = (),
) -> bool:
    """Queue the result to `caller_label` (followed through aliases); False if it is gone
    or this result was posted before."""
    caller = uow.ledger.sessions.resolve(caller_label)
    if caller is None:
        return False
    payload: dict[str, Any] = {
        "kind": WORKER_RESULT,
        "worker": worker_label,
        "failed": status != TaskStatus.COMPLETED,
        "task_status": status.value,
    }
    if task is not None:
        payload["task"] = task
    return post(
        uow,
        doorbell,
        session_id=caller.id,
        event_id=result_event_id(key),
        text=f"[{WORKER_RESULT}] {worker_label} {_VERDICTS[status]}: {text}",
        payload=payload,
        lineage=lineage,
    )


def report_undispatched(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    caller: SessionRecord,
    name: str,
    key: str,
    why: str,
) -> bool:
    """A dispatch the caller's turn was told about could not land with its commit (what it
    named changed meanwhile): the caller hears so as a failed result, and its turn stands."""
    return post(
        uow,
        doorbell,
        session_id=caller.id,
        event_id=result_event_id(f"undispatched:{key}"),
        text=f"[{WORKER_RESULT}] {name} failed: the dispatch did not happen: {why}",
        payload={
            "kind": WORKER_RESULT,
            "worker": name,
            "failed": True,
            "task_status": TaskStatus.FAILED.value,
        },
    )


# -- tasks dispatched to existing sessions and forks ---------------------------------------


def is_task_event(event_id: str | None) -> bool:
    """Whether the event carries a tracked task (its id says so: no read needed to know)."""
    return event_id is not None and event_id.startswith(TASK_EVENT_PREFIX)


def task_inputs(result: TurnResult) -> list[str]:
    """The tracked tasks' events among the inputs a turn answered (batched and injected)."""
    return [
        m.event_id
        for m in result.messages
        if m.role == MessageRole.USER and m.event_id is not None and is_task_event(m.event_id)
    ]


def settle_tasks(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    session: SessionRecord,
    event_ids: list[str],
    text: str,
    status: TaskStatus,
    *,
    lineage: Sequence[str] = (),
) -> set[str]:
    """Settle the still pending tasks these events carry and send each caller its result,
    in the caller's commit; the labels of the callers told."""
    moved = set(uow.ledger.tasks.settle(event_ids, status))
    told: set[str] = set()
    for task in uow.ledger.tasks.for_events(sorted(moved)):
        key = f"task:{task.event_id}"
        sent = _post_to(
            uow,
            doorbell,
            task.caller_session_label,
            session.label,
            key,
            text,
            status,
            task=task.event_id,
            lineage=lineage,
        )
        if sent:
            told.add(task.caller_session_label)
    return told


def _answer(result: TurnResult) -> str:
    answers = [
        m.content.get("text", "")
        for m in result.messages
        if m.role == MessageRole.ASSISTANT and not m.content.get("partial")
    ]
    return answers[-1] if answers else "(no answer)"


def worker_result_hook(doorbell: Doorbell | None) -> CommitHook:
    """The engine commit hook: after a worker's turn, its final answer goes to the parent
    (unless the turn already called reply_to_caller: same event id, posted once); after
    any session's turn that answered a tracked task, the answer goes to the task's caller
    (an aborted turn reports the task failed, so no caller waits on it)."""

    def hook(
        uow: UnitOfWork,
        session: SessionRecord,
        turn_id: str,
        result: TurnResult,
        _source: EventRecord | None,
    ) -> None:
        told: set[str] = set()
        tasks = task_inputs(result)
        reports = session.is_subagent and result.status == TurnStatus.COMPLETED
        if not tasks and not reports:
            return  # most turns: nothing to post, so no lineage to read (a statement saved)
        # What the turn posts carries the hooks whose firings caused it: they never
        # evaluate it (docs/hooks.md, "Lineage").
        lineage = uow.ledger.events.hook_lineage(turn_id=turn_id)
        if tasks and result.status == TurnStatus.COMPLETED:
            answer = _answer(result)
            told = settle_tasks(
                uow, doorbell, session, tasks, answer, TaskStatus.COMPLETED, lineage=lineage
            )
        elif tasks and result.status == TurnStatus.ABORTED:
            why = "its turn was aborted before it finished"
            told = settle_tasks(
                uow, doorbell, session, tasks, why, TaskStatus.FAILED, lineage=lineage
            )
        if not reports:
            return
        if session.parent_session_label in told:
            # Its manager sent this as a tracked task and has the answer: once is enough.
            uow.ledger.workers.set_task_status(session.id, TaskStatus.COMPLETED)
            return
        deliver(uow, doorbell, session, turn_id, _answer(result), lineage=lineage)

    return hook
