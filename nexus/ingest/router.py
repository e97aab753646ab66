"""The router (`nexus.event.process`): identity → policy → session → queue item."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

from nexus.access.policy import Decision, Delivery, PeerKind, Policy, Principal, decide
from nexus.db import UnitOfWork
from nexus.ingest.doorbell import Doorbell
from nexus.ledger.enums import EventStatus, MessageSource, QueueMode, SessionOrigin
from nexus.ledger.records import EventRecord, NewQueueItem, NewSession
from nexus.ledger.repository import NotFound

QUEUED, DENIED = "queued", "denied"

# DESIGN §5: a person's message preempts a stale answer; automation waits its turn.
_DEFAULT_MODES = {
    MessageSource.HUMAN: QueueMode.INTERRUPT,
    MessageSource.AGENT: QueueMode.FOLLOWUP,
    MessageSource.CRON: QueueMode.FOLLOWUP,
    MessageSource.TRIGGER: QueueMode.FOLLOWUP,
    MessageSource.WEBHOOK: QueueMode.FOLLOWUP,
}


def default_queue_mode(source: MessageSource | None) -> QueueMode:
    return _DEFAULT_MODES.get(source, QueueMode.QUEUE) if source else QueueMode.QUEUE


@dataclass(frozen=True)
class Routed:
    event_id: str
    disposition: Literal["queued", "denied", "already processed"]
    session_id: str | None = None
    session_label: str | None = None
    queue_item_id: str | None = None
    reason: str | None = None


def principal_for(uow: UnitOfWork, event: EventRecord) -> Principal:
    """The canonical entity behind the event's sender (seed 002's progressive identity)."""
    if event.sender_id is None:
        return Principal(type="unknown")
    entity_id = uow.ledger.identity.contact_entity(event.platform, event.sender_id)
    if entity_id is None:
        return Principal(type="unknown")
    root = uow.ledger.identity.canonical_entity(entity_id)
    entity = uow.ledger.identity.get_entity(root)
    if entity is None:  # pragma: no cover - canonical_entity only returns stored ids
        return Principal(type="unknown")
    return Principal(
        type="owner" if entity.is_owner else "known",
        entity_id=root,
        tags=frozenset(entity.tags),
    )


def delivery_for(event: EventRecord) -> Delivery:
    kind: PeerKind = "dm"
    if event.container_kind in ("group", "channel"):
        kind = "group" if event.container_kind == "group" else "channel"
    return Delivery(
        platform=event.platform,
        peer_kind=kind,
        peer_id=event.container_id or event.sender_id or "",
        thread_id=event.platform_thread_id,
    )


def process_event(
    uow: UnitOfWork, event_id: str, policies: Sequence[Policy], doorbell: Doorbell
) -> Routed:
    """Route one stored event to a session's queue; safe to run twice for one event."""
    event = uow.ledger.events.get(event_id)
    if event is None:
        raise NotFound(f"no event {event_id!r}")
    if event.status != EventStatus.RECEIVED:
        return Routed(event_id=event_id, disposition="already processed")
    decision: Decision = decide(policies, principal_for(uow, event), delivery_for(event))
    if not decision.allowed or decision.session_key is None or decision.persona is None:
        reason = f"{decision.reason} (policy {decision.policy or 'none'})"
        uow.ledger.events.mark_processed(event_id, DENIED, reason)
        return Routed(event_id=event_id, disposition="denied", reason=reason)

    persona = uow.ledger.agents.ensure(decision.persona)
    session = uow.ledger.sessions.ensure(
        NewSession(
            label=decision.session_key,
            persona_id=persona.id,
            origin=SessionOrigin.USER,
            routing_key=decision.session_key,
            source_event_id=event_id,
        )
    )
    # Precedence: the session's own setting, then the policy's, then the source's default.
    mode = session.queue_mode or decision.queue_mode or default_queue_mode(event.source)
    item_id, created = uow.ledger.queue.enqueue(
        NewQueueItem(session_id=session.id, event_id=event_id, mode=mode, source=event.source)
    )
    uow.ledger.events.mark_processed(event_id, QUEUED, f"session {session.label}")
    if created:
        uow.after_commit(partial(doorbell.session_has_work, session.id))
    return Routed(
        event_id=event_id,
        disposition="queued",
        session_id=session.id,
        session_label=session.label,
        queue_item_id=item_id,
    )
