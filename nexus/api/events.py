"""Custom bridges post normalized events; anyone authorised can read an event's fate."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel

from nexus.api.deps import AUTHENTICATED, DatabaseDep, NexusDep
from nexus.api.errors import ApiError
from nexus.event import NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.records import EventRecord

router = APIRouter(prefix="/v1/events", tags=["events"], dependencies=AUTHENTICATED)


class EventAccepted(BaseModel):
    """202 when stored now; 200 when that id was stored before (a retry, deduplicated)."""

    event_id: str
    duplicate: bool
    routable: bool


@router.post("", status_code=202, responses={200: {"model": EventAccepted}})
async def post_event(event: NexusEvent, graph: NexusDep, response: Response) -> EventAccepted:
    """Ingest an already-normalized event (an iMessage relay, a custom bridge).

    The bridge chooses the id (`{adapter}:{its own id}`), so its retries are deduplicated.
    """

    def store() -> bool:
        with graph.database.unit_of_work() as uow:
            [result] = ingest(uow, [event], graph.doorbell)
            uow.commit()
        return result.stored

    stored = await run_in_threadpool(store)
    response.status_code = 202 if stored else 200
    return EventAccepted(event_id=event.id, duplicate=not stored, routable=event.routable)


@router.get("/{event_id:path}")
def get_event(event_id: str, database: DatabaseDep) -> EventRecord:
    """One stored event with its disposition (what became of it)."""
    with database.unit_of_work() as uow:
        event = uow.ledger.events.get(event_id)
    if event is None:
        raise ApiError(404, "not_found", f"no event {event_id!r}")
    return event
