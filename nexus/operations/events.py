"""Stored events read by id, with what became of each (their disposition)."""

from __future__ import annotations

from nexus.db import UnitOfWork
from nexus.ledger.records import EventRecord
from nexus.ledger.repository import NotFound


def get_event(uow: UnitOfWork, event_id: str) -> EventRecord:
    """One stored event (NotFound when there is none)."""
    event = uow.ledger.events.get(event_id)
    if event is None:
        raise NotFound(f"no event {event_id!r}")
    return event
