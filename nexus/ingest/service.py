"""Ingest: store verified events (and their senders) in one transaction, ring after commit."""

from __future__ import annotations

import hashlib
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
        model_overrides=event.model_overrides,
    )


# Identifier columns are VARCHAR(255) on Postgres; Unix ms must fit BIGINT (and a sane year).
_ID_CHARS = 255
_MAX_MILLIS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _text(value: str) -> str:
    """Text Postgres can hold: no NUL, no lone surrogate (JSON's "\\ud800" decodes to one)."""
    value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_cleaned(v) for v in value)
    return value


def fit_id(value: str | None) -> str | None:
    """An identifier that fits its column: a long one keeps a readable head and gains a
    SHA-256 of the whole, so distinct ids stay distinct and the same one maps the same."""
    if value is None or len(value) <= _ID_CHARS:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()
    return f"{value[: _ID_CHARS - 72]}~sha256:{digest}"


def _bounded(dumped: dict[str, Any]) -> dict[str, Any]:
    for key in ("space", "platform_thread_id", "reply_to", "message_id"):
        dumped[key] = fit_id(dumped[key])
    for key in ("sender", "container"):
        if dumped[key] is not None:
            dumped[key]["id"] = fit_id(dumped[key]["id"])
    if not 0 <= dumped["occurred_at"] <= _MAX_MILLIS:
        dumped["occurred_at"] = 0  # unknown, as when a platform dates nothing
    return dumped


def storable(event: NexusEvent) -> NexusEvent:
    """The event as the ledger can hold it. Postgres text and JSONB cannot hold NUL or a
    lone surrogate (each becomes U+FFFD); an identifier over its column's 255 characters is
    shortened with a hash (`fit_id`); a date outside years 1970-9999 becomes 0 (unknown). A
    platform cannot fix what it sends, so the message is kept, not refused."""
    dumped = event.model_dump()
    cleaned = _bounded(_cleaned(dumped))
    return event if cleaned == dumped else NexusEvent.model_validate(cleaned)


def _store(uow: UnitOfWork, event: NexusEvent) -> bool:
    """Store the event, a person's with their contact touched (or created on first
    contact); False when it was stored before. Someone seen before costs one statement."""
    if not event.routable or event.sender is None:
        return uow.ledger.events.insert(_draft(event, None))
    sender = event.sender
    known = uow.ledger.events.insert_from_known_sender(
        _draft(event, None),
        platform=event.platform,
        sender_id=sender.id,
        display_name=sender.display_name,
    )
    if known is not None:
        return known[1]
    contact_id = uow.ledger.identity.touch_contact(event.platform, sender.id, sender.display_name)
    return uow.ledger.events.insert(_draft(event, contact_id))


def ingest(uow: UnitOfWork, events: Sequence[NexusEvent], doorbell: Doorbell) -> list[Ingested]:
    """Record `events` in the caller's unit of work; the caller commits, then answers 2xx.

    A routable event from a person also records the sender as a contact (creating their
    entity on first contact) and rings the router once the transaction has committed. An
    event that will not become a turn is stored with its disposition at once: nothing a
    platform sends is dropped without a trace.
    """
    results: list[Ingested] = []
    for event in map(storable, events):
        stored = _store(uow, event)
        if stored and event.delivery_status and event.message_id:
            detail = apply_status(uow, event.adapter, event.message_id, event.delivery_status)
            uow.ledger.events.mark_processed(event.id, STATUS, detail)
        elif stored and not event.routable:
            uow.ledger.events.mark_processed(event.id, IGNORED, event.ignore_reason)
        if stored and event.routable:
            uow.after_commit(partial(doorbell.event_received, event.id))
        results.append(Ingested(event_id=event.id, stored=stored, routable=event.routable))
    return results
