"""Sessions: the queue (list, cancel) and manual compaction; more lands with the Surfaces work."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from nexus.agents.tree import session_tree
from nexus.api.auth import require_token
from nexus.api.errors import ApiError
from nexus.api.state import AppState
from nexus.ingest.direct import request_compaction
from nexus.ledger.enums import Disposition, QueueStatus
from nexus.ledger.records import QueueItemRecord, SessionRecord
from nexus.ledger.repository import NotFound

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], dependencies=[Depends(require_token)])


class CompactRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instructions: str | None = Field(default=None, max_length=4000)


class CompactResponse(BaseModel):
    """The compaction is queued: the session's runner carries it out in queue order, under
    its lease; the queue item's disposition (and `consumed_by_turn_id`) tells the outcome."""

    status: str  # queued
    session: str
    queue_item_id: str


def _compact(state: AppState, label: str, instructions: str | None) -> CompactResponse:
    with state.database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve(label)
        if session is None:
            raise ApiError(404, "not_found", f"no session labelled {label!r}")
        item_id = request_compaction(uow, session, state.doorbell, instructions=instructions)
        uow.commit()
    return CompactResponse(status="queued", session=session.label, queue_item_id=item_id)


@router.post("/{label:path}/compact", status_code=202)
async def compact(
    label: str, request: Request, body: CompactRequest | None = None
) -> CompactResponse:
    """Queue a compaction of the session's context; every turn stays in the ledger."""
    state: AppState = request.app.state.nexus
    return await run_in_threadpool(_compact, state, label, body.instructions if body else None)


class QueueItemView(BaseModel):
    id: str
    event_id: str | None
    mode: str
    status: str
    disposition: str | None
    detail: str | None
    attempts: int
    enqueued_at: int
    consumed_by_turn_id: str | None

    @classmethod
    def of(cls, item: QueueItemRecord) -> QueueItemView:
        return cls(
            id=item.id,
            event_id=item.event_id,
            mode=item.mode.value,
            status=item.status.value,
            disposition=item.disposition.value if item.disposition else None,
            detail=item.disposition_detail,
            attempts=item.attempts,
            enqueued_at=item.enqueued_at,
            consumed_by_turn_id=item.consumed_by_turn_id,
        )


class QueueView(BaseModel):
    session: str
    items: list[QueueItemView]


def _session(state: AppState, label: str) -> SessionRecord:
    with state.database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve(label)
    if session is None:
        raise ApiError(404, "not_found", f"no session labelled {label!r}")
    return session


@router.get("/{label:path}/tree")
def tree(label: str, request: Request) -> dict[str, Any]:
    """The session's turn tree: each turn, and the workers and forks that branch off it."""
    state: AppState = request.app.state.nexus
    with state.database.unit_of_work() as uow:
        try:
            return session_tree(uow.ledger, label)
        except NotFound as error:
            raise ApiError(404, "not_found", str(error)) from error


@router.get("/{label:path}/queue")
def queue(label: str, request: Request, open_only: bool = False) -> QueueView:
    """The session's queue items in order, with what became of each."""
    state: AppState = request.app.state.nexus
    session = _session(state, label)
    statuses = [QueueStatus.QUEUED, QueueStatus.CLAIMED] if open_only else None
    with state.database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(session.id, statuses=statuses)
    return QueueView(session=session.label, items=[QueueItemView.of(i) for i in items])


@router.delete("/{label:path}/queue/{item_id}")
def cancel(label: str, item_id: str, request: Request) -> QueueItemView:
    """Cancel a waiting item; one a run has claimed (or that is settled) is 409."""
    state: AppState = request.app.state.nexus
    session = _session(state, label)
    with state.database.unit_of_work() as uow:
        item = uow.ledger.queue.get(item_id)
        if item is None or item.session_id != session.id:
            raise ApiError(404, "not_found", f"no queue item {item_id!r} in {session.label!r}")
        changed = uow.ledger.queue.dispose(
            [item_id],
            status=QueueStatus.DROPPED,
            disposition=Disposition.CANCELLED,
            detail="cancelled through the API",
            only_waiting=True,
        )
        if not changed:
            raise ApiError(409, "conflict", f"item {item_id} is {item.status.value}, not waiting")
        cancelled = uow.ledger.queue.get(item_id)
        uow.commit()
    assert cancelled is not None
    return QueueItemView.of(cancelled)
