"""Ingest: store verified events (and their senders) in one transaction, ring after commit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.event import NexusEvent
from nexus.ledger.enums import MessageSource
from nexus.ledger.records import EventDraft
from nexus.outbound.status import apply_status

IGNORED = "ignored"
STATUS = "status"  # a status callback, applied to the delivery it names


@dataclass(frozen=True)
class Ingested:
    event_id: str
    stored: bool  # False when this was a redelivery of an event stored before
    routable: bool


def _draft(event: NexusEvent, contact_id: str | None) -> EventDraft:
    return EventDraft(
        id=event.id,
        adapter=event.adapter,
        platform=event.platform,
        kind=event.kind,
        source=MessageSource.WEBHOOK if event.adapter == "webhook" else MessageSource.HUMAN,
        space=event.space,
        sender_id=event.sender.id if event.sender else None,
        sender_name=event.sender.display_name if event.sender else None,
        container_kind=event.container.kind if event.container else None,
        container_id=event.container.id if event.container else None,
        platform_thread_id=event.platform_thread_id,
        text=event.text,
        attachments=tuple(a.model_dump(exclude_none=True) for a in event.attachments),
        reply_to=event.reply_to,
        message_id=event.message_id,
        occurred_at=event.occurred_at,
        payload=event.raw,
        contact_id=contact_id,
    )


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_without_nul(v) for v in value)
    return value


def storable(event: NexusEvent) -> NexusEvent:
    """The event with every NUL character replaced by U+FFFD. Postgres text and JSONB cannot
    hold NUL; a platform cannot fix what it sends, so the message is kept, not refused."""
    dumped = event.model_dump()
    cleaned = _without_nul(dumped)
    return event if cleaned == dumped else NexusEvent.model_validate(cleaned)


def ingest(uow: UnitOfWork, events: Sequence[NexusEvent], doorbell: Doorbell) -> list[Ingested]:
    """Record `events` in the caller's unit of work; the caller commits, then answers 2xx.

    A routable event from a person also records the sender as a contact (creating their
    entity on first contact) and rings the router once the transaction has committed. An
    event that will not become a turn is stored with its disposition at once: nothing a
    platform sends is dropped without a trace.
    """
    results: list[Ingested] = []
    for event in map(storable, events):
        contact_id = None
        if event.routable and event.sender is not None:
            contact_id = uow.ledger.identity.touch_contact(
                event.platform, event.sender.id, event.sender.display_name
            )
        stored = uow.ledger.events.insert(_draft(event, contact_id))
        if stored and event.delivery_status and event.message_id:
            detail = apply_status(uow, event.adapter, event.message_id, event.delivery_status)
            uow.ledger.events.mark_processed(event.id, STATUS, detail)
        elif stored and not event.routable:
            uow.ledger.events.mark_processed(event.id, IGNORED, event.ignore_reason)
        if stored and event.routable:
            uow.after_commit(partial(doorbell.event_received, event.id))
        results.append(Ingested(event_id=event.id, stored=stored, routable=event.routable))
    return results
