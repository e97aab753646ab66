"""Custom bridges post normalized events; anyone authorised can read an event's fate."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from nexus.api.auth import require_token
from nexus.api.errors import ApiError
from nexus.api.state import AppState
from nexus.event import NexusEvent
from nexus.ingest.service import ingest

router = APIRouter(prefix="/v1/events", tags=["events"], dependencies=[Depends(require_token)])


@router.post("", status_code=202)
async def post_event(event: NexusEvent, request: Request) -> JSONResponse:
    """Ingest an already-normalized event (an iMessage relay, a custom bridge).

    The bridge chooses the id (`{adapter}:{its own id}`), so its retries are deduplicated.
    """
    state: AppState = request.app.state.nexus

    def store() -> bool:
        with state.database.unit_of_work() as uow:
            [result] = ingest(uow, [event], state.doorbell)
            uow.commit()
        return result.stored

    stored = await run_in_threadpool(store)
    return JSONResponse(
        {"event_id": event.id, "duplicate": not stored, "routable": event.routable},
        status_code=202 if stored else 200,
    )


@router.get("/{event_id:path}")
def get_event(event_id: str, request: Request) -> dict[str, Any]:
    state: AppState = request.app.state.nexus
    with state.database.unit_of_work() as uow:
        event = uow.ledger.events.get(event_id)
    if event is None:
        raise ApiError(404, "not_found", f"no event {event_id!r}")
    return event.model_dump()
