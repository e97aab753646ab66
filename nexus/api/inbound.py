"""Inbound webhooks: verify on the raw bytes, store in one transaction, answer after commit."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from nexus.adapters.inbound.base import InboundAdapter, InboundOutcome, InboundRequest
from nexus.api.body import read_limited
from nexus.api.errors import ApiError
from nexus.api.state import AppState
from nexus.ingest.service import ingest

router = APIRouter(prefix="/v1/inbound", tags=["inbound"])


def _adapter(state: AppState, name: str) -> InboundAdapter:
    adapter = state.adapters.get(name)
    if adapter is None:
        known = ", ".join(sorted(state.adapters))
        raise ApiError(404, "unknown_adapter", f"no inbound adapter {name!r} (known: {known})")
    return adapter


def _store(state: AppState, outcome: InboundOutcome) -> list[dict[str, Any]]:
    with state.database.unit_of_work() as uow:
        results = ingest(uow, outcome.events, state.doorbell)
        uow.commit()
    return [
        {"event_id": r.event_id, "duplicate": not r.stored, "routable": r.routable} for r in results
    ]


async def _handle(request: Request, name: str) -> Response:
    state: AppState = request.app.state.nexus
    adapter = _adapter(state, name)
    body = await read_limited(request, state.settings.max_body_bytes)
    inbound = InboundRequest(
        method=request.method,
        url=str(request.url),
        headers={key.lower(): value for key, value in request.headers.items()},
        body=body,
        query=dict(request.query_params),
    )
    adapter.verify(inbound, now_ms=state.clock())
    outcome = adapter.parse(inbound)
    stored = await run_in_threadpool(_store, state, outcome) if outcome.events else []
    # The platform hears back only now, after the commit: a 2xx always means "recorded".
    if outcome.answer is not None:
        answer = outcome.answer
        if answer.media_type == "application/json":
            return JSONResponse(answer.body)
        # A challenge echoed as text, or TwiML: the platform wants the bytes verbatim.
        return Response(str(answer.body), media_type=answer.media_type)
    return JSONResponse({"accepted": stored})


@router.post("/{adapter}")
async def receive(request: Request, adapter: str) -> Response:
    """A platform's webhook delivery."""
    return await _handle(request, adapter)


@router.get("/{adapter}")
async def handshake(request: Request, adapter: str) -> Response:
    """Subscription handshakes that platforms send as GET (WhatsApp's hub challenge)."""
    return await _handle(request, adapter)
