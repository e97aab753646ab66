"""Hooks over HTTP: list them with their breakers, switch one on or off, read its invocations."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from nexus.api.deps import AUTHENTICATED, DatabaseDep
from nexus.api.errors import ApiError, error_responses
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.db import Database
from nexus.ledger.records import HookRecord
from nexus.ledger.strings import HookName

router = APIRouter(
    prefix="/v1/hooks", tags=["hooks"], dependencies=AUTHENTICATED, responses=error_responses(404)
)


class HookView(BaseModel):
    """A hook and its breaker; not its path or own state, the operator's files and data."""

    name: str
    description: str
    mode: str
    schedule: str | None
    enabled: bool
    breaker_state: str
    consecutive_errors: int
    last_fired_at: int | None

    @classmethod
    def of(cls, hook: HookRecord) -> HookView:
        return cls.model_validate(hook.model_dump())


class HookList(BaseModel):
    items: list[HookView]


class InvocationView(BaseModel):
    id: str
    event_id: str | None
    started_at: int
    latency_ms: int
    fired: bool
    result: dict[str, Any] | None
    error: str | None


def _invocation(row: dict[str, Any]) -> InvocationView:
    return InvocationView.model_validate({key: row[key] for key in InvocationView.model_fields})


@router.get("")
def list_hooks(database: DatabaseDep) -> HookList:
    """Every hook the table knows, by name; one whose file is gone shows as disabled."""
    with database.unit_of_work() as uow:
        hooks = uow.ledger.hooks.all()
    return HookList(items=[HookView.of(hook) for hook in hooks])


def _switch(database: Database, name: str, enabled: bool) -> HookView:
    with database.unit_of_work() as uow:
        hook = uow.ledger.hooks.set_enabled(name, enabled)
        if hook is None:
            raise ApiError(404, "not_found", f"no hook named {name!r}")
        uow.commit()
    return HookView.of(hook)


@router.post("/{name}/enable")
def enable(name: HookName, database: DatabaseDep) -> HookView:
    return _switch(database, name, True)


@router.post("/{name}/disable")
def disable(name: HookName, database: DatabaseDep) -> HookView:
    return _switch(database, name, False)


@router.get("/{name}/invocations")
def invocations(
    name: HookName, database: DatabaseDep, page: Annotated[PageRequest, Depends(page_request)]
) -> Page[InvocationView]:
    """The hook's evaluations, newest first, a page at a time."""
    with database.unit_of_work() as uow:
        # The hook first: a cursor means nothing without it (404 rather than 400).
        if uow.ledger.hooks.get(name) is None:
            raise ApiError(404, "not_found", f"no hook named {name!r}")
        before = decode_cursor(page.cursor, [int, str])
        rows = uow.ledger.hooks.invocations_page(
            name,
            before=(int(before[0]), str(before[1])) if before else None,
            limit=page.limit + 1,
        )
    return page_body(rows, page.limit, lambda r: (r["started_at"], r["id"]), _invocation)
