"""Custom bridges post normalized events; anyone authorised can read an event's fate."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from fastapi import Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field, StringConstraints

from nexus.api.auth import Caller
from nexus.api.deps import CallerDep, DatabaseDep, NexusDep, v1_router
from nexus.api.errors import ApiError
from nexus.api.schemas.model import ModelConfigBody, without_nulls
from nexus.arrival.messages import API_ADAPTER
from nexus.event import INTERNAL_TRIGGERS, Author, Container, NexusEvent
from nexus.hooks.service import TIMER_ADAPTER
from nexus.ingest.service import ingest
from nexus.ledger.records import EventRecord
from nexus.ledger.strings import AdapterName, EventId
from nexus.ledger.strings import Key as Column
from nexus.operations import events as stored
from nexus.outbound.addressing import SENDERS

router = v1_router("/v1/events", "events", 403, 404)

# Nexus's own doors: an event posted under one of these names would pass for Nexus itself.
OWN_DOORS = frozenset({API_ADAPTER, TIMER_ADAPTER, *INTERNAL_TRIGGERS})
ID_PREFIX = "api"
# The ledger's ids hold 255 characters: room for `api:{8-hex namespace}:` in front.
MAX_GIVEN_ID = 255 - len(ID_PREFIX) - 10

# The ledger's column sizes, so an oversized value is a 422 here, not a database error.
Name = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Key = Annotated[str, StringConstraints(max_length=255)]
PlatformKind = Annotated[str, Column.of("entities", "type", "a platform name")]


class PostedAuthor(Author):
    id: Key


class PostedContainer(Container):
    id: Key


class PostedEvent(NexusEvent):
    """A normalized event as a bridge posts it: `id` is the bridge's own
    (`{adapter}:{its id}`); it is stored under the caller's namespace."""

    id: str = Field(min_length=3, max_length=MAX_GIVEN_ID)
    adapter: AdapterName
    # A sender's first message files them as an entity of this platform's kind
    # (`entities.type`), so the platform is at most as long as that column.
    platform: PlatformKind
    space: Key | None = None
    sender: PostedAuthor | None = None
    container: PostedContainer | None = None
    platform_thread_id: Key | None = None
    reply_to: Key | None = None
    message_id: Key | None = None
    # `model_config` in JSON: the model configuration of the turn that answers this event,
    # checked on its own here (the session it is routed to is not known yet).
    model_overrides: ModelConfigBody | None = Field(default=None, alias="model_config")


class EventAccepted(BaseModel):
    """202 when stored now; 200 when that id was stored before (a retry, deduplicated)."""

    event_id: str
    duplicate: bool
    routable: bool


def stored_id(caller: Caller, given: str) -> str:
    """Where a posted event's id lives: `api:{caller}:{given}`, apart from every platform's
    ids (`telegram:…`) and every other caller's, so nobody can pre-empt a real update (it
    would be taken for a redelivery and dropped)."""
    return f"{ID_PREFIX}:{caller.namespace}:{given}"


def refusal(caller: Caller, event: NexusEvent, served: Iterable[str]) -> str | None:
    """Why `caller` may not post `event`, or None (pure). Posing as a platform Nexus serves
    (or as Nexus itself) would put the event in that platform's sessions under a sender's
    identity, and send the answer to a real chat: only an admin token may."""
    claimed = sorted({event.adapter, event.platform} & (OWN_DOORS | set(served)))
    if not claimed or caller.admin:
        return None
    return (
        f"this token may not post events as {claimed[0]!r}, a platform or door Nexus serves "
        "itself (their answers would go to its chats); use a bridge's own adapter name, or "
        "a token from NEXUS_API_ADMIN_TOKENS"
    )


@router.post("", status_code=202, responses={200: {"model": EventAccepted}})
async def post_event(
    event: PostedEvent, caller: CallerDep, graph: NexusDep, response: Response
) -> EventAccepted:
    """Ingest an already-normalized event (an iMessage relay, a custom bridge).

    The bridge chooses the id (`{adapter}:{its own id}`), so its retries are deduplicated;
    it is stored (and answered) as `api:{caller}:{id}`.
    """
    refused = refusal(caller, event, {*SENDERS, *graph.inbound_adapters})
    if refused is not None:
        raise ApiError(403, "forbidden", refused)
    scoped = event.model_copy(
        update={
            "id": stored_id(caller, event.id),
            "model_overrides": without_nulls(event.model_overrides),
        }
    )

    def store() -> bool:
        with graph.database.unit_of_work() as uow:
            [result] = ingest(uow, [scoped], graph.doorbell)
            uow.commit()
        return result.stored

    stored = await run_in_threadpool(store)
    response.status_code = 202 if stored else 200
    return EventAccepted(event_id=scoped.id, duplicate=not stored, routable=scoped.routable)


@router.get("/{event_id:path}")
def get_event(event_id: EventId, database: DatabaseDep) -> EventRecord:
    """One stored event with its disposition (what became of it)."""
    with database.unit_of_work() as uow:
        return stored.get_event(uow, event_id)
