"""Hooks over HTTP: list them with their breakers, switch one on or off, read its invocations,
register the API process's hooks directory, dry-run one hook."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Depends
from pydantic import BaseModel, ValidationError

from nexus.api.deps import DatabaseDep, NexusDep, v1_router
from nexus.api.errors import ApiError, error_responses
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.db import Database
from nexus.hooks import admin
from nexus.hooks.admin import HookNotFound
from nexus.hooks.dry_run import DryRun, UnknownHook, dry_run, dry_run_event
from nexus.hooks.registry import RegistrationRefused, sync_directory
from nexus.ledger.records import HookRecord
from nexus.ledger.strings import HookName

router = v1_router("/v1/hooks", "hooks", 404)


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


class SyncView(BaseModel):
    """What a registration did: hooks registered or updated, hooks disabled because their
    file is gone, and files that did not load."""

    registered: list[str]
    disabled: list[str]
    problems: list[str]


@router.get("")
def list_hooks(database: DatabaseDep) -> HookList:
    """Every hook the table knows, by name; one whose file is gone shows as disabled."""
    with database.unit_of_work() as uow:
        hooks = admin.all_hooks(uow)
    return HookList(items=[HookView.of(hook) for hook in hooks])


def _switch(database: Database, name: str, enabled: bool) -> HookView:
    try:
        with database.unit_of_work() as uow:
            hook = admin.set_enabled(uow, name, enabled)
            uow.commit()
    except HookNotFound as error:
        raise ApiError(404, "not_found", str(error)) from error
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
        try:
            admin.get(uow, name)
        except HookNotFound as error:
            raise ApiError(404, "not_found", str(error)) from error
        before = decode_cursor(page.cursor, [int, str])
        rows = admin.invocations(
            uow,
            name,
            before=(int(before[0]), str(before[1])) if before else None,
            limit=page.limit + 1,
        )
    return page_body(rows, page.limit, lambda r: (r["started_at"], r["id"]), _invocation)


@router.post("/sync", responses=error_responses(409))
def sync(graph: NexusDep, allow_empty: bool = False) -> SyncView:
    """Register the hooks of the API process's NEXUS_HOOKS_DIR as the deployment's: new ones
    enabled, changed ones updated, ones whose file is gone disabled. 409, changing nothing,
    when the directory is missing, a file does not load, or it is empty (unless
    `allow_empty`)."""
    try:
        done = sync_directory(
            graph.fresh_hook_runner, graph.settings.hooks_dir, allow_empty=allow_empty
        )
    except RegistrationRefused as error:
        raise ApiError(409, "registration_refused", str(error)) from error
    return SyncView(
        registered=list(done.hooks), disabled=list(done.disabled), problems=list(done.problems)
    )


@router.post("/{name}/test")
def dry_run_hook(
    name: HookName, graph: NexusDep, event: Annotated[dict[str, Any], Body()]
) -> DryRun:
    """Evaluate the hook, as loaded from the API process's NEXUS_HOOKS_DIR, on `event` (the
    fields of an event; those left out take dry-run defaults). Nothing is written."""
    try:
        record = dry_run_event(event)
    except ValidationError as error:
        raise ApiError(422, "invalid_request", f"not an event: {error}") from error
    try:
        done = dry_run(graph.fresh_hook_runner, name, record)
    except UnknownHook as error:
        raise ApiError(404, "not_found", str(error)) from error
    return done
