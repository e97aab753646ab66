"""Hooks over HTTP: list them with their breakers, switch one on or off, read its invocations."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from nexus.api.auth import require_token
from nexus.api.errors import ApiError
from nexus.api.pagination import PageRequest, decode_cursor, page_body, page_request
from nexus.api.state import AppState
from nexus.ledger.records import HookRecord

router = APIRouter(prefix="/v1/hooks", tags=["hooks"], dependencies=[Depends(require_token)])


def _state(request: Request) -> AppState:
    state: AppState = request.app.state.nexus
    return state


def _view(hook: HookRecord) -> dict[str, Any]:
    # Not the path or the hook's own state: those are the operator's files and data.
    return {
        "name": hook.name,
        "description": hook.description,
        "mode": hook.mode,
        "schedule": hook.schedule,
        "enabled": hook.enabled,
        "breaker_state": hook.breaker_state,
        "consecutive_errors": hook.consecutive_errors,
        "last_fired_at": hook.last_fired_at,
    }


def _invocation(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "event_id", "started_at", "latency_ms", "fired", "result", "error")
    return {key: row[key] for key in keys}


@router.get("")
def list_hooks(request: Request) -> dict[str, Any]:
    """Every hook the table knows, by name; one whose file is gone shows as disabled."""
    with _state(request).database.unit_of_work() as uow:
        hooks = uow.ledger.hooks.all()
    return {"items": [_view(hook) for hook in hooks]}


def _switch(request: Request, name: str, enabled: bool) -> dict[str, Any]:
    with _state(request).database.unit_of_work() as uow:
        hook = uow.ledger.hooks.set_enabled(name, enabled)
        if hook is None:
            raise ApiError(404, "not_found", f"no hook named {name!r}")
        uow.commit()
    return _view(hook)


@router.post("/{name}/enable")
def enable(name: str, request: Request) -> dict[str, Any]:
    return _switch(request, name, True)


@router.post("/{name}/disable")
def disable(name: str, request: Request) -> dict[str, Any]:
    return _switch(request, name, False)


@router.get("/{name}/invocations")
def invocations(
    name: str, request: Request, page: Annotated[PageRequest, Depends(page_request)]
) -> dict[str, Any]:
    """The hook's evaluations, newest first, a page at a time."""
    before = decode_cursor(page.cursor, [int, str])
    with _state(request).database.unit_of_work() as uow:
        if uow.ledger.hooks.get(name) is None:
            raise ApiError(404, "not_found", f"no hook named {name!r}")
        rows = uow.ledger.hooks.invocations_page(
            name,
            before=(int(before[0]), str(before[1])) if before else None,
            limit=page.limit + 1,
        )
    return page_body(rows, page.limit, lambda r: (r["started_at"], r["id"]), _invocation)
