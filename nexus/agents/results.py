"""A worker's result always reaches its parent as a durable `worker_result` queue item."""

from __future__ import annotations

from nexus.agents.posting import post
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.service import CommitHook
from nexus.engine.turn import TurnResult
from nexus.ledger.enums import MessageRole, TurnStatus
from nexus.ledger.records import SessionRecord

WORKER_RESULT = "worker_result"


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
) -> bool:
    """Queue `text` as the worker's result to its parent (once per `key`)."""
    if not worker.is_subagent or worker.parent_session_label is None:
        return False
    parent = uow.ledger.sessions.resolve(worker.parent_session_label)
    if parent is None:
        return False
    verdict = "failed" if failed else "reports"
    return post(
        uow,
        doorbell,
        session_id=parent.id,
        event_id=result_event_id(key),
        text=f"[{WORKER_RESULT}] {worker.label} {verdict}: {text}",
        payload={"kind": WORKER_RESULT, "worker": worker.label, "failed": failed},
    )


def worker_result_hook(doorbell: Doorbell | None) -> CommitHook:
    """The engine commit hook: after a worker's turn, its final answer goes to the parent
    (unless the turn already called reply_to_caller: same event id, posted once)."""

    def hook(uow: UnitOfWork, session: SessionRecord, turn_id: str, result: TurnResult) -> None:
        if not session.is_subagent or result.status != TurnStatus.COMPLETED:
            return
        answers = [
            m.content.get("text", "")
            for m in result.messages
            if m.role == MessageRole.ASSISTANT and not m.content.get("partial")
        ]
        deliver(uow, doorbell, session, turn_id, answers[-1] if answers else "(no answer)")

    return hook
