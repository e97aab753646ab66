"""/v1/sessions: list and create, send and read, abort and stream, the queue, compaction."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from functools import partial
from typing import Annotated

import structlog
from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from nexus.agents.tree import session_tree
from nexus.api import stream_replay
from nexus.api.deps import AUTHENTICATED, CoordinationDep, DatabaseDep, NexusDep
from nexus.api.errors import RETRY_AFTER_S, ApiError, error_body, error_responses
from nexus.api.model_settings import check_model
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.api.schemas.model import without_nulls
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
from nexus.arrival.messages import request_compaction, send_to_session
from nexus.arrival.service import refuse_archived
from nexus.bootstrap import Nexus
from nexus.db import UnitOfWork
from nexus.engine.stream import QUEUE_ITEM_DROPPED
from nexus.ids import now_ms
from nexus.ledger.enums import Disposition, QueueStatus, SessionOrigin
from nexus.ledger.records import NewSession, SessionLabel, SessionRecord, check_new_label
from nexus.ledger.repository import LabelTaken, NotFound
from nexus.ledger.strings import PersonaName, QueueItemId
from nexus.queueing.coordination import CoordinationUnavailable
from nexus.queueing.pending import places
from nexus.queueing.running import RunningTurn
from nexus.queueing.stream_log import BadStreamId, ResumeId, parse_resume_id
from nexus.sessions.rollback import NotInChain, TurnRunning, rollback

log = structlog.get_logger(__name__)
router = APIRouter(
    prefix="/v1/sessions",
    tags=["sessions"],
    dependencies=AUTHENTICATED,
    responses=error_responses(404, 409),
)
# A quiet stream still sends a comment this often, so proxies keep the connection open
# and a client that went away is noticed.
KEEPALIVE_MS = 15_000
# What a client waits before reconnecting when a stream ends (EventSource's `retry`).
RECONNECT_MS = 2_000


def session_view(uow: UnitOfWork, session: SessionRecord) -> SessionView:
    persona = uow.ledger.agents.get(session.persona_id)
    return SessionView(
        **session.model_dump(),
        persona=persona.name if persona else None,
        aliases=[alias for alias, _ in uow.ledger.sessions.aliases_of(session.label)],
    )


def running_view(found: RunningTurn | None) -> RunningView | None:
    return None if found is None else RunningView(**dataclasses.asdict(found))


def resolve(uow: UnitOfWork, label: str) -> SessionRecord:
    session = uow.ledger.sessions.resolve(label)
    if session is None:
        raise ApiError(404, "not_found", f"no session labelled {label!r}")
    return session


def resolve_any(uow: UnitOfWork, label: str) -> SessionRecord:
    """As `resolve`, and else the newest deleted session that had the label: for reading
    it, and for answering what became of it."""
    session = uow.ledger.sessions.resolve(label) or uow.ledger.sessions.get_by_label(label)
    if session is None:
        raise ApiError(404, "not_found", f"no session labelled {label!r}")
    return session


def _session(database: DatabaseDep, label: str) -> SessionRecord:
    with database.unit_of_work() as uow:
        return resolve_any(uow, label)


@router.get("")
def list_sessions(
    database: DatabaseDep,
    page: Annotated[PageRequest, Depends(page_request)],
    persona: PersonaName | None = None,
) -> Page[SessionView]:
    """Sessions in label order, optionally of one persona (by name)."""
    after = decode_cursor(page.cursor, [str])
    with database.unit_of_work() as uow:
        persona_id = None
        if persona is not None:
            agent = uow.ledger.agents.get_by_name(persona)
            if agent is None:
                raise ApiError(404, "not_found", f"no persona named {persona!r}")
            persona_id = agent.id
        rows = uow.ledger.sessions.page(
            after_label=str(after[0]) if after else None,
            limit=page.limit + 1,
            persona_id=persona_id,
        )
        return page_body(rows, page.limit, lambda s: (s.label,), lambda s: session_view(uow, s))


@router.post("", status_code=201)
def create_session(body: CreateSession, database: DatabaseDep) -> SessionView:
    """A new, empty session for a persona (created when it does not exist yet)."""
    with database.unit_of_work() as uow:
        if uow.ledger.sessions.resolve(body.label) is not None:
            raise ApiError(409, "conflict", f"session {body.label!r} exists")
        agent = uow.ledger.agents.ensure(body.persona)
        try:
            session = uow.ledger.sessions.create(
                NewSession(
                    label=body.label,
                    persona_id=agent.id,
                    origin=SessionOrigin.USER,
                    queue_mode=body.queue_mode,
                )
            )
        except LabelTaken as error:
            raise ApiError(409, "conflict", str(error)) from error
        view = session_view(uow, session)
        uow.commit()
    return view


def _new_label(label: str) -> None:
    try:
        check_new_label(label)
    except ValueError as error:
        raise ApiError(422, "invalid_request", str(error)) from error


# -- talking to a session --------------------------------------------------------------------


def _send(graph: Nexus, label: str, body: SendMessage) -> Queued:
    with graph.database.unit_of_work() as uow:
        if uow.ledger.sessions.resolve(label) is None:
            gone = uow.ledger.sessions.get_by_label(label)
            if gone is not None:  # not silently a new session: say so, and how to get one
                refuse_archived(gone)
            _new_label(label)  # a missing session is created: under a label a caller may choose
        queued = send_to_session(
            uow,
            label,
            body.content,
            graph.doorbell,
            persona=body.persona,
            mode=body.mode,
            source=body.source,
            arrivals=graph.coordination,
            queueing=graph.queue_policy,
            policies=graph.policies,
            model_overrides=without_nulls(body.model_overrides),
        )
        check_model(uow, graph.settings.default_model, queued.session, body.model_overrides)
        uow.commit()
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
        session = resolve_any(uow, label)
        chain = uow.ledger.threads.read_ancestry(session.thread_id) if session.thread_id else []
    if limit is not None and limit >= 0:
        chain = chain[-limit:] if limit else []
    return SessionThread(session=session.label, turns=chain)


@router.post("/{label:path}/rollback", responses=error_responses(404, 409, 422))
def rollback_session(label: SessionLabel, body: RollbackRequest, graph: NexusDep) -> RolledBackView:
    """Move the session's head back to `turn_id`, a turn of its own chain behind the head;
    the next message continues from there. Nothing is deleted: the abandoned turns stay
    readable (the tree shows them as an `abandoned` branch) and the move is kept in the
    session's pointer history. 409 while a turn runs (with `abort: true`, the turn is asked
    to stop first: retry once it has), for a deleted session, or a turn off its chain."""
    session = _session(graph.database, label)
    try:
        done = rollback(
            graph.database,
            graph.coordination,
            graph.doorbell,
            session.id,
            body.turn_id,
            abort=body.abort,
        )
    except NotFound as error:
        raise ApiError(404, "not_found", str(error)) from error
    except TurnRunning as error:
        raise ApiError(409, "turn_running", str(error)) from error
    except NotInChain as error:
        raise ApiError(409, "not_in_chain", str(error)) from error
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
    session = _session(database, label)
    # The epoch as read now: the turn running now (claimed at it) stops; a later one does not.
    coordination.request_abort(session.id, epoch=session.epoch)
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
        session = resolve(uow, label)
        item_id = request_compaction(
            uow,
            session,
            graph.doorbell,
            instructions=instructions,
            arrivals=graph.coordination,
            queueing=graph.queue_policy,
        )
        uow.commit()
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
        try:
            found = SessionTree.model_validate(session_tree(uow.ledger, label))
            session = resolve_any(uow, label)
        except NotFound as error:
            raise ApiError(404, "not_found", str(error)) from error
    now = coordination.running(session.id)
    return found.model_copy(update={"running": running_view(now)})


@router.get("/{label:path}/queue")
def queue(label: SessionLabel, database: DatabaseDep, open_only: bool = False) -> QueueView:
    """The session's queue items in order, with what became of each."""
    session = _session(database, label)
    statuses = [QueueStatus.QUEUED, QueueStatus.CLAIMED] if open_only else None
    with database.unit_of_work() as uow:
        items = uow.ledger.queue.for_session(session.id, statuses=statuses)
        found = places(items, now_ms=uow.ledger.clock())
    return QueueView(
        session=session.label, items=[QueueItemView.of(i, found.get(i.id)) for i in items]
    )


@router.delete("/{label:path}/queue/{item_id}")
def cancel(
    label: SessionLabel, item_id: QueueItemId, database: DatabaseDep, coordination: CoordinationDep
) -> QueueItemView:
    """Cancel a waiting item; one a run has claimed (or that is settled) is 409."""
    session = _session(database, label)
    with database.unit_of_work() as uow:
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
        dropped = {"queue_item_id": item_id, "disposition": "cancelled", "reason": "cancelled"}
        uow.after_commit(partial(coordination.publish, session.id, QUEUE_ITEM_DROPPED, dropped))
        uow.commit()
    assert cancelled is not None
    return QueueItemView.of(cancelled)


# Last: `{label:path}` would otherwise swallow every /v1/sessions/{label}/… route above.
