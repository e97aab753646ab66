"""Turns read by id — one turn, and its whole ancestry — and forking a new session from one."""

from __future__ import annotations

from nexus.db import UnitOfWork
from nexus.ledger.records import SessionRecord, TurnView
from nexus.ledger.repository import NotFound


def get_turn(uow: UnitOfWork, turn_id: str) -> TurnView:
    """One turn with its messages and tool calls."""
    view = uow.ledger.threads.get_turn(turn_id)
    if view is None:
        raise NotFound(f"no turn {turn_id!r}")
    return view


def turn_thread(uow: UnitOfWork, turn_id: str) -> list[TurnView]:
    """Every turn from the root to `turn_id`, oldest first, compactions included."""
    view = get_turn(uow, turn_id)
    if uow.ledger.threads.get_thread(turn_id) is not None:
        return uow.ledger.threads.read_ancestry(turn_id)
    # A failed or superseded turn is off every chain; its ancestry is its parent's.
    parent = view.turn.parent_turn_id
    return [*(uow.ledger.threads.read_ancestry(parent) if parent else []), view]


def fork(uow: UnitOfWork, turn_id: str, label: str | None = None) -> SessionRecord:
    """A new session whose head is `turn_id` (the persona is the thread's; no label: the
    ledger names it fork-<id>); commits. NotForkable for a turn off every chain,
    LabelTaken."""
    get_turn(uow, turn_id)
    session = uow.ledger.sessions.fork(turn_id, label=label)
    uow.commit()
    return session
