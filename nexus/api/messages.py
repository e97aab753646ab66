"""Talking to a session: send a message, read its thread, abort its turn, stream its events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from nexus.api.auth import require_token
from nexus.api.session_index import resolve
from nexus.api.state import AppState
from nexus.ingest.direct import send_to_session
from nexus.ledger.enums import MessageSource, QueueMode
from nexus.ledger.records import SessionLabel, StorableText
from nexus.queueing.coordination import Coordination

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], dependencies=[Depends(require_token)])
MAX_MESSAGE_CHARS = 100_000
# A quiet stream still sends a comment this often, so proxies keep the connection open
# and a client that went away is noticed.
KEEPALIVE_MS = 15_000


class SendMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: StorableText = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    mode: QueueMode | None = None
    persona: StorableText | None = Field(default=None, min_length=1, max_length=200)
    source: MessageSource = MessageSource.HUMAN


class Queued(BaseModel):
    event_id: str
    queue_item_id: str
    session: str
    mode: QueueMode


def _send(state: AppState, label: str, body: SendMessage) -> Queued:
    with state.database.unit_of_work() as uow:
        queued = send_to_session(
            uow,
            label,
            body.content,
            state.doorbell,
            persona=body.persona,
            mode=body.mode,
            source=body.source,
            arrivals=state.coordination,
            queueing=state.queueing,
        )
        uow.commit()
    return Queued(
        event_id=queued.event_id,
        queue_item_id=queued.queue_item_id,
        session=queued.session.label,
        mode=queued.mode,
    )


@router.post("/{label:path}/messages", status_code=202)
async def send_message(label: SessionLabel, body: SendMessage, request: Request) -> Queued:
    """Queue a message (the session is created with `persona` when it does not exist); the
    answer is a turn, read from /turns or the stream."""
    return await run_in_threadpool(_send, request.app.state.nexus, label, body)


@router.get("/{label:path}/turns")
def thread_at_head(label: str, request: Request, limit: int | None = None) -> dict[str, Any]:
    """The thread at the session's head: its turns oldest first, with their messages
    (`limit`: only the newest that many)."""
    state: AppState = request.app.state.nexus
    with state.database.unit_of_work() as uow:
        session = resolve(uow, label)
        chain = uow.ledger.threads.read_ancestry(session.thread_id) if session.thread_id else []
    if limit is not None and limit >= 0:
        chain = chain[-limit:] if limit else []
    return {"session": session.label, "turns": [v.model_dump(mode="json") for v in chain]}


@router.post("/{label:path}/abort", status_code=202)
def abort(label: str, request: Request) -> dict[str, Any]:
    """Ask the running turn to stop at its next stream chunk or boundary; its partial answer
    is kept as an aborted turn. Harmless when nothing runs."""
    state: AppState = request.app.state.nexus
    with state.database.unit_of_work() as uow:
        session = resolve(uow, label)
    state.coordination.request_abort(session.id)
    return {"session": session.label, "abort_requested": True}


@router.get("/{label:path}/stream")
def stream(
    label: str,
    request: Request,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """Server-sent events for the session (seed 003's names, each with an id). Reconnect
    with `Last-Event-ID` to replay what was missed while it is kept (an hour, 1,000
    events)."""
    state: AppState = request.app.state.nexus
    with state.database.unit_of_work() as uow:
        session = resolve(uow, label)
    after = last_event_id or state.coordination.stream_tail(session.id)
    return StreamingResponse(
        _events(state.coordination, session.id, after),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _events(coordination: Coordination, session_id: str, after: str) -> Iterator[str]:
    """Runs in a thread (Starlette iterates a sync generator there); ends when the client
    goes away, noticed at the next write."""
    yield "retry: 2000\n\n"
    while True:
        entries = coordination.read_stream(session_id, after, block_ms=KEEPALIVE_MS)
        if not entries:
            yield ": keep-alive\n\n"
            continue
        for entry in entries:
            data = json.dumps(entry.data, separators=(",", ":"), default=str)
            yield f"id: {entry.id}\nevent: {entry.type}\ndata: {data}\n\n"
            after = entry.id
