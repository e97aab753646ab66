"""Inbound webhooks: verify on the raw bytes, store in one transaction, answer after commit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from nexus.adapters.inbound.base import InboundAdapter, InboundOutcome, InboundRequest
from nexus.api.body import read_limited
from nexus.api.deps import NexusDep
from nexus.api.errors import ApiError, error_responses
from nexus.bootstrap import Nexus
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.event import NexusEvent
from nexus.ingest.gmail import record_push
from nexus.ingest.service import Ingested, ingest
from nexus.ledger.strings import AdapterName

# How a delivery's events are recorded in the request's unit of work (a Gmail push also
# rings its mailbox's sync).
Record = Callable[[UnitOfWork, Sequence[NexusEvent], Doorbell], list[Ingested]]

router = APIRouter(prefix="/v1/inbound", tags=["inbound"], responses=error_responses(404))


class Stored(BaseModel):
    event_id: str
    duplicate: bool
    routable: bool


class Accepted(BaseModel):
    """What a delivery recorded (answered only after the commit)."""

    accepted: list[Stored]


# A platform gets what it asked for: this JSON, or its own answer (a challenge echoed as
# text, TwiML, a Slack or Discord handshake), so the routes answer raw responses.
PLATFORM_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {
        "model": Accepted,
        "description": "Recorded; or the platform's own handshake answer",
        "content": {"text/plain": {}, "application/xml": {}},
    }
}


def _adapter(graph: Nexus, name: str) -> InboundAdapter:
    adapter = graph.inbound_adapters.get(name)
    if adapter is None:
        known = ", ".join(sorted(graph.inbound_adapters))
        raise ApiError(404, "unknown_adapter", f"no inbound adapter {name!r} (known: {known})")
    return adapter


def _store(graph: Nexus, outcome: InboundOutcome, record: Record = ingest) -> list[Stored]:
    with graph.database.unit_of_work() as uow:
        results = record(uow, outcome.events, graph.doorbell)
        uow.commit()
    return [
        Stored(event_id=r.event_id, duplicate=not r.stored, routable=r.routable) for r in results
    ]


async def _handle(request: Request, graph: Nexus, name: str, record: Record = ingest) -> Response:
    adapter = _adapter(graph, name)
    body = await read_limited(request, graph.settings.max_body_bytes)
    inbound = InboundRequest(
        method=request.method,
        url=str(request.url),
        headers={key.lower(): value for key, value in request.headers.items()},
        body=body,
        query=dict(request.query_params),
    )
    adapter.verify(inbound, now_ms=graph.clock())
    outcome = adapter.parse(inbound)
    stored = await run_in_threadpool(_store, graph, outcome, record) if outcome.events else []
    # The platform hears back only now, after the commit: a 2xx always means "recorded".
    if outcome.answer is not None:
        answer = outcome.answer
        if answer.media_type == "application/json":
            return JSONResponse(answer.body)
        # A challenge echoed as text, or TwiML: the platform wants the bytes verbatim.
        return Response(str(answer.body), media_type=answer.media_type)
    return JSONResponse(Accepted(accepted=stored).model_dump())


@router.post("/gmail", response_model=Accepted)
async def gmail_push(request: Request, graph: NexusDep) -> Response:
    """Gmail's push through Cloud Pub/Sub (`?token=`): recorded, then a worker reads the
    mailbox's new messages (before `/{adapter}`, which would take it otherwise)."""
    settings = graph.settings
    mailbox = settings.gmail_mailbox if settings.gmail_enabled else None
    return await _handle(request, graph, "gmail", partial(record_push, mailbox=mailbox))


@router.post("/{adapter}", responses=PLATFORM_ANSWERS)
async def receive(request: Request, adapter: AdapterName, graph: NexusDep) -> Response:
    """A platform's webhook delivery."""
    return await _handle(request, graph, adapter)


@router.get("/{adapter}", responses=PLATFORM_ANSWERS)
async def handshake(request: Request, adapter: AdapterName, graph: NexusDep) -> Response:
    """Subscription handshakes that platforms send as GET (WhatsApp's hub challenge)."""
    return await _handle(request, graph, adapter)
