"""GET /v1/sessions/{label}/events: a session's kept stream events, page by page (the SSE
stream's reconnect reads them too: nexus/api/stream_replay.py; docs/operations.md, "Session
events")."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query
from pydantic import BaseModel

from nexus.api.deps import DatabaseDep, v1_router
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.ledger.records import SessionLabel
from nexus.ledger.repository.session_events import SessionEventRecord
from nexus.sessions import service as sessions

# Registered before nexus.api.session_detail, whose `{label:path}` would take these.
router = v1_router("/v1/sessions", "sessions", 400, 404)


class SessionEventView(BaseModel):
    """One kept stream event: `sequence` counts the session's events from 1."""

    id: str
    session: str
    sequence: int
    type: str
    data: dict[str, Any]
    turn_id: str | None
    created_at: int


@router.get("/{label:path}/events")
def session_events(
    label: SessionLabel,
    database: DatabaseDep,
    page: Annotated[PageRequest, Depends(page_request)],
    after: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description=(
                "Start after this event: a sequence number, a kept event's id, or an SSE "
                "event id (Last-Event-ID); 400 invalid_after when it is none of these"
            ),
        ),
    ] = None,
) -> Page[SessionEventView]:
    """The session's kept stream events in sequence order: every event of each committed
    turn, from `session.started` to `session.completed`. Append-only."""
    cursor = decode_cursor(page.cursor, [int])
    with database.reading() as uow:
        session, rows = sessions.event_page(
            uow, label, after=int(cursor[0]) if cursor else after, limit=page.limit + 1
        )
    return page_body(
        rows, page.limit, lambda row: (row.sequence,), lambda row: _view(session.label, row)
    )


def _view(label: str, row: SessionEventRecord) -> SessionEventView:
    return SessionEventView(**row.model_dump(exclude={"session_id"}), session=label)
