"""Hooks as the operator manages them: list them with their breakers, switch one on or
off, read its invocations. Plain functions over the caller's unit of work (the caller
commits); an unknown hook is HookNotFound."""

from __future__ import annotations

from typing import Any

from nexus.db import UnitOfWork
from nexus.ledger.records import HookRecord
from nexus.ledger.repository import NotFound


class HookNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"no hook named {name!r}")


def all_hooks(uow: UnitOfWork) -> list[HookRecord]:
    """Every hook the table knows, by name (one whose file is gone is disabled)."""
    return uow.ledger.hooks.all()


def get(uow: UnitOfWork, name: str) -> HookRecord:
    """The hook and its breaker."""
    found = uow.ledger.hooks.get(name)
    if found is None:
        raise HookNotFound(name)
    return found


def set_enabled(uow: UnitOfWork, name: str, enabled: bool) -> HookRecord:
    """Switch the hook on or off by hand; its breaker stays as it is."""
    hook = uow.ledger.hooks.set_enabled(name, enabled)
    if hook is None:
        raise HookNotFound(name)
    return hook


def invocations(
    uow: UnitOfWork, name: str, *, before: tuple[int, str] | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` of the hook's evaluations, newest first, older than `before` (the
    `(started_at, id)` of the last one seen); none for an unknown hook (`get` tells)."""
    return uow.ledger.hooks.invocations_page(name, before=before, limit=limit)
