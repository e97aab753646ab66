"""/v1/sessions: list and create, send and read, abort and stream, the queue, compaction."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Annotated

import structlog
from fastapi import Depends, Header, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from nexus.api import stream_replay
from nexus.api.deps import CoordinationDep, DatabaseDep, NexusDep, v1_router
from nexus.api.errors import RETRY_AFTER_S, ApiError, error_body, error_responses
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.api.schemas.sessions import (
    AbortRequested,
    CompactQueued,
    CompactRequest,
    CreateSession,
    Queued,
    QueueItemView,
    QueueView,
    RollbackRequest,
    RolledBackView,
    RunningView,
    SendMessage,
    SessionThread,
    SessionTree,
    SessionView,
)
from nexus.bootstrap import Nexus
from nexus.db import Database
from nexus.ids import now_ms
from nexus.ledger.records import SessionLabel, SessionRecord
from nexus.ledger.strings import PersonaName, QueueItemId
from nexus.queueing.coordination import CoordinationUnavailable
from nexus.queueing.running import RunningTurn
from nexus.queueing.stream_log import BadStreamId, ResumeId, parse_resume_id
from nexus.sessions import service as sessions

log = structlog.get_logger(__name__)
router = v1_router("/v1/sessions", "sessions", 404, 409)
# A quiet stream still sends a comment this often, so proxies keep the connection open
# and a client that went away is noticed.
KEEPALIVE_MS = 15_000
# What a client waits before reconnecting when a stream ends (EventSource's `retry`).
RECONNECT_MS = 2_000


def session_view(found: sessions.SessionEntry) -> SessionView:
    return SessionView(**found.session.model_dump(), persona=found.persona, aliases=found.aliases)


def running_view(found: RunningTurn | None) -> RunningView | None:
    return None if found is None else RunningView(**dataclasses.asdict(found))


def _session(database: Database, label: str) -> SessionRecord:
    with database.unit_of_work() as uow:
        return sessions.get_any(uow, label)


@router.get("")
def list_sessions(
    database: DatabaseDep,
    page: Annotated[PageRequest, Depends(page_request)],
    persona: PersonaName | None = None,
) -> Page[SessionView]:
    """Sessions in label order, optionally of one persona (by name)."""
    after = decode_cursor(page.cursor, [str])
    with database.unit_of_work() as uow:
        rows = sessions.list_sessions(
            uow, after=str(after[0]) if after else None, limit=page.limit + 1, persona=persona
        )
    return page_body(rows, page.limit, lambda s: (s.session.label,), session_view)


@router.post("", status_code=201)
def create_session(body: CreateSession, database: DatabaseDep) -> SessionView:
    """A new, empty session for a persona (created when it does not exist yet)."""
    with database.unit_of_work() as uow:
        return session_view(sessions.create(uow, body.label, body.persona, body.queue_mode))


# -- talking to a session --------------------------------------------------------------------


def _send(graph: Nexus, label: str, body: SendMessage) -> Queued:
    with graph.database.unit_of_work() as uow:
        queued = sessions.send(
            uow,
            graph,
            label,
            body.content,
            persona=body.persona,
            mode=body.mode,
            source=body.source,
            model_overrides=body.model_overrides,
        )
    return Queued(
        event_id=queued.event_id,
        queue_item_id=queued.queue_item_id,
        session=queued.session.label,
        mode=queued.mode,
    )


@router.post("/{label:path}/messages", status_code=202)
async def send_message(label: SessionLabel, body: SendMessage, graph: NexusDep) -> Queued:
    """Queue a message (the session is created with `persona` when it does not exist); the
    answer is a turn, read from /turns or the stream."""
    return await run_in_threadpool(_send, graph, label, body)


@router.get("/{label:path}/turns")
def thread_at_head(
    label: SessionLabel, database: DatabaseDep, limit: int | None = None
) -> SessionThread:
    """The thread at the session's head: its turns oldest first, with their messages
    (`limit`: only the newest that many)."""
    with database.unit_of_work() as uow:
        session, chain = sessions.thread(uow, label, limit)
    return SessionThread(session=session.label, turns=chain)


@router.post("/{label:path}/rollback", responses=error_responses(404, 409, 422))
def rollback_session(label: SessionLabel, body: RollbackRequest, graph: NexusDep) -> RolledBackView:
    """Move the session's head back to `turn_id`, a turn of its own chain behind the head;
    the next message continues from there. Nothing is deleted: the abandoned turns stay
    readable (the tree shows them as an `abandoned` branch) and the move is kept in the
    session's pointer history. 409 while a turn runs (with `abort: true`, the turn is asked
    to stop first: retry once it has), for a deleted session, or a turn off its chain."""
    done = sessions.rollback_session(
        graph.database, graph.coordination, graph.doorbell, label, body.turn_id, abort=body.abort
    )
    return RolledBackView(
        session=done.session.label,
        head=done.session.thread_id,
        previous_head=done.previous_head,
        moved=done.moved,
    )


@router.post("/{label:path}/abort", status_code=202)
def abort(
    label: SessionLabel, database: DatabaseDep, coordination: CoordinationDep
) -> AbortRequested:
    """Ask the running turn to stop at its next stream chunk or boundary; its partial answer
    is kept as an aborted turn. Harmless when nothing runs."""
    with database.unit_of_work() as uow:
        session = sessions.abort(uow, coordination, label)
    return AbortRequested(session=session.label, abort_requested=True)


@router.get(
    "/{label:path}/stream",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "Server-sent events"},
        400: {"description": "A malformed Last-Event-ID"},
        503: {"description": "The stream store (Redis) does not answer; retry later"},
    },
)
async def stream(
    label: SessionLabel,
    graph: NexusDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    last_event_id_query: Annotated[str | None, Query(alias="last_event_id")] = None,
) -> Response:
    """Server-sent events for the session (docs/engine.md, "The stream"), with a
    comment every 15 s while quiet; it stays open until the client leaves. Reconnect with
    `Last-Event-ID` (or `?last_event_id=` where a client cannot set headers; the header
    wins) to replay what was missed: from Redis while it has it (an hour, 1,000 events),
    else every kept event from the ledger (docs/operations.md, "Session events"), then live."""
    # Stream ids carry the wall clock of whoever wrote them (Redis, or this process).
    resume = _resume_from(now_ms(), last_event_id, last_event_id_query)
    # Served on the event loop: an open stream holds a socket, never a worker thread.
    session = await run_in_threadpool(_session, graph.database, label)
    try:
        start = await stream_replay.stream_start(
            graph.database, graph.coordination, session.id, resume
        )
    except CoordinationUnavailable:
        return JSONResponse(
            error_body("unavailable", "the session stream is unreachable; retry later"),
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return StreamingResponse(
        _events(graph, session.id, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _resume_from(now_ms: int, header: str | None, query: str | None) -> ResumeId | None:
    """The id to resume after, if the client gave one (the header last, so it wins). A
    malformed one is a 400, never a silent replay from elsewhere: that would be a gap or
    duplicates."""
    after = None
    for where, given in (("last_event_id", query), ("the Last-Event-ID header", header)):
        if given is not None:
            try:
                after = parse_resume_id(given, now_ms=now_ms)
            except BadStreamId as error:
                raise ApiError(400, "invalid_last_event_id", f"{where}: {error}") from error
    return after


async def _events(
    graph: Nexus, session_id: str, start: stream_replay.StreamStart
) -> AsyncIterator[str]:
    """Runs on the event loop; Starlette cancels it when the client goes away."""
    yield f"retry: {RECONNECT_MS}\n\n"
    async for chunk in stream_replay.stream_events(graph, session_id, start, block_ms=KEEPALIVE_MS):
        yield chunk


# -- the queue, the tree, compaction -----------------------------------------------------------


def _compact(graph: Nexus, label: str, instructions: str | None) -> CompactQueued:
    with graph.database.unit_of_work() as uow:
        session, item_id = sessions.compact(uow, graph, label, instructions)
    return CompactQueued(status="queued", session=session.label, queue_item_id=item_id)


@router.post("/{label:path}/compact", status_code=202)
async def compact(
    label: SessionLabel, graph: NexusDep, body: CompactRequest | None = None
) -> CompactQueued:
    """Queue a compaction of the session's context; every turn stays in the ledger."""
    return await run_in_threadpool(_compact, graph, label, body.instructions if body else None)


@router.get("/{label:path}/tree")
def tree(label: SessionLabel, database: DatabaseDep, coordination: CoordinationDep) -> SessionTree:
    """The session's turn tree: each turn, and the workers and forks that branch off it;
    a turn still running is `running`, on its way to becoming a child of `head`."""
    with database.unit_of_work() as uow:
        found = sessions.tree(uow, coordination, label)
    view = SessionTree.model_validate(found.tree)
    return view.model_copy(update={"running": running_view(found.running)})


@router.get("/{label:path}/queue")
def queue(label: SessionLabel, database: DatabaseDep, open_only: bool = False) -> QueueView:
    """The session's queue items in order, with what became of each."""
    with database.unit_of_work() as uow:
        found = sessions.queue(uow, label, open_only=open_only)
    return QueueView(
        session=found.session.label,
        items=[QueueItemView.of(i, found.places.get(i.id)) for i in found.items],
    )


@router.delete("/{label:path}/queue/{item_id}")
def cancel(
    label: SessionLabel, item_id: QueueItemId, database: DatabaseDep, coordination: CoordinationDep
) -> QueueItemView:
    """Cancel a waiting item; one a run has claimed (or that is settled) is 409."""
    with database.unit_of_work() as uow:
        return QueueItemView.of(sessions.cancel_item(uow, coordination, label, item_id))


# Last: `{label:path}` would otherwise swallow every /v1/sessions/{label}/… route above.
