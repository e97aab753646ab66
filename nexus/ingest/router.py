"""The router's steps for an event: identity → policy → session → queue item (batches: batch.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal, Protocol

from nexus.access.policy import Decision, PeerKind, Policy, Principal, Venue, decide
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.query import QueryMessage
from nexus.engine.stream import QUEUE_ITEM_DROPPED, QUEUE_ITEM_QUEUED, StreamEvent
from nexus.ingest.arrival import (
    SHIPPED_QUEUE_POLICY,
    Arrival,
    QueuePolicy,
    archived_reason,
    arrival,
)
from nexus.ledger.enums import (
    EventStatus,
    MessageSource,
    QueueMode,
    SessionOrigin,
    SessionStatus,
)
from nexus.ledger.records import (
    EntityRecord,
    EventRecord,
    NewQueueItem,
    NewSession,
    SessionRecord,
)
from nexus.ledger.repository import NotFound
from nexus.queueing.modes import arrival_action
from nexus.queueing.overflow import SUMMARY_PENDING, Overflow, drop_over_cap
from nexus.queueing.settings import (
    item_payload,
)

QUEUED, DENIED = "queued", "denied"


class ArrivalSignals(Protocol):
    """How an arriving message reaches a turn already running, and the session's stream
    (the coordination port)."""

    def request_abort(self, session_id: str, *, epoch: int) -> None: ...

    def steer(self, session_id: str, message: QueryMessage, *, epoch: int) -> None: ...

    def publish_many(self, events: Sequence[StreamEvent]) -> None: ...


@dataclass(frozen=True)
class ProcessedEvent:
    event_id: str
    disposition: Literal["queued", "denied", "already processed"]
    session_id: str | None = None
    session_label: str | None = None
    queue_item_id: str | None = None
    reason: str | None = None


def principal_for(
    uow: UnitOfWork, event: EventRecord, contact_entity: EntityRecord | None = None
) -> Principal:
    """The canonical entity behind the event's sender (seed 002's progressive identity).
    `contact_entity` is the entity of the contact the event was stored with, when the
    caller read it with the event; it is followed through merges like a looked-up one."""
    if event.sender_id is None:
        return Principal(type="unknown")
    if contact_entity is not None:
        entity = uow.ledger.identity.canonical(contact_entity)
    else:
        entity = uow.ledger.identity.sender_entity(event.platform, event.sender_id)
    if entity is None:
        return Principal(type="unknown")
    return Principal(
        type="owner" if entity.is_owner else "known",
        entity_id=entity.id,
        tags=frozenset(entity.tags),
    )


def delivery_for(event: EventRecord) -> Venue:
    kind: PeerKind = "dm"
    if event.container_kind in ("group", "channel"):
        kind = "group" if event.container_kind == "group" else "channel"
    return Venue(
        platform=event.platform,
        peer_kind=kind,
        peer_id=event.container_id or event.sender_id or "",
        thread_id=event.platform_thread_id,
    )


def process_event(
    uow: UnitOfWork,
    event_id: str,
    policies: Sequence[Policy],
    doorbell: Doorbell,
    *,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy = SHIPPED_QUEUE_POLICY,
) -> ProcessedEvent:
    """Route one stored event to a session's queue; safe to run twice for one event."""
    event = uow.ledger.events.get(event_id)
    if event is None:
        raise NotFound(f"no event {event_id!r}")
    if event.status != EventStatus.RECEIVED:
        return ProcessedEvent(event_id=event_id, disposition="already processed")
    routed, outcome = _route(uow, event, policies, arrivals=arrivals, queueing=queueing)
    uow.ledger.events.mark_processed(*outcome)
    if routed.session_id is not None:
        uow.after_commit(partial(doorbell.session_has_work, routed.session_id))
    return routed


def queue_item(session: SessionRecord, came: Arrival) -> NewQueueItem:
    return NewQueueItem(
        session_id=session.id,
        event_id=came.event.id,
        mode=came.mode,
        source=came.event.source,
        payload=item_payload(came.settings),
    )


def announce(
    uow: UnitOfWork,
    arrivals: ArrivalSignals,
    session_id: str,
    queued: Sequence[tuple[str, EventRecord, QueueMode]],
    dropped: Overflow,
) -> None:
    """After commit, tell the session's stream what its queue gained and lost: one publish
    for the whole batch (`queue.item.queued`, `queue.item.dropped`)."""
    events = [
        StreamEvent(
            session_id,
            QUEUE_ITEM_QUEUED,
            {"queue_item_id": item_id, "event_id": event.id, "mode": mode.value},
        )
        for item_id, event, mode in queued
    ]
    events.extend(
        StreamEvent(
            session_id,
            QUEUE_ITEM_DROPPED,
            {"queue_item_id": item_id, "disposition": "dropped", "reason": dropped.reason},
        )
        for item_id in dropped.item_ids
    )
    if events:
        uow.after_commit(partial(arrivals.publish_many, events))


def _route(
    uow: UnitOfWork,
    event: EventRecord,
    policies: Sequence[Policy],
    *,
    arrivals: ArrivalSignals | None,
    queueing: QueuePolicy,
) -> tuple[ProcessedEvent, tuple[str, str, str | None]]:
    """Identity → policy → session → queue item, for an event still waiting. Returns the
    result and the event's disposition for the caller to record."""
    decision: Decision = decide(policies, principal_for(uow, event), delivery_for(event))
    if not decision.allowed or decision.session_key is None or decision.persona is None:
        reason = f"{decision.reason} (policy {decision.policy or 'none'})"
        denied = ProcessedEvent(event_id=event.id, disposition="denied", reason=reason)
        return denied, (event.id, DENIED, reason)

    persona = uow.ledger.agents.ensure(decision.persona)
    session = uow.ledger.sessions.ensure(
        NewSession(
            label=decision.session_key,
            persona_id=persona.id,
            origin=SessionOrigin.USER,
            routing_key=decision.session_key,
            source_event_id=event.id,
        )
    )
    if session.status == SessionStatus.ARCHIVED:
        reason = archived_reason(session)
        denied = ProcessedEvent(event_id=event.id, disposition="denied", reason=reason)
        return denied, (event.id, DENIED, reason)
    came = arrival(session, decision, event, queueing)
    item_id, _ = queue_into(uow, session, came, None, arrivals=arrivals)
    queued = ProcessedEvent(
        event_id=event.id,
        disposition="queued",
        session_id=session.id,
        session_label=session.label,
        queue_item_id=item_id,
    )
    return queued, (event.id, QUEUED, f"session {session.label}")


def queue_into(
    uow: UnitOfWork,
    session: SessionRecord,
    came: Arrival,
    doorbell: Doorbell | None,
    *,
    arrivals: ArrivalSignals | None = None,
) -> tuple[str, bool]:
    """Queue `came.event` for `session` (once), apply the cap it arrived under, ring the
    session after commit (unless `doorbell` is None: the caller rings) and signal a running
    turn per the mode. Returns the item id and whether it is new."""
    # Routers for one session take turns from here to commit: two counting the queue at
    # once for the cap would each see one item too many and drop the same one. Locked
    # before the insert, whose foreign-key check would otherwise take a lock first.
    epoch = uow.ledger.sessions.lock(session.id)
    item_id, created, waiting, _ = uow.ledger.queue.enqueue_counting(
        queue_item(session, came), summary_marker=SUMMARY_PENDING
    )
    if created:
        limits = came.settings
        dropped = drop_over_cap(
            uow, session.id, cap=limits.cap.value, policy=limits.drop.value, waiting=waiting
        )
        if doorbell is not None:
            uow.after_commit(partial(doorbell.session_has_work, session.id))
        if arrivals is not None:
            event, mode = came.event, came.mode
            signal_running_turn(uow, arrivals, session.id, mode, event, item_id, epoch=epoch)
            announce(uow, arrivals, session.id, [(item_id, event, mode)], dropped)
    return item_id, created


def signal_running_turn(
    uow: UnitOfWork,
    arrivals: ArrivalSignals,
    session_id: str,
    mode: QueueMode,
    event: EventRecord,
    item_id: str,
    *,
    epoch: int,
) -> None:
    """After commit, tell a turn that may be running: stop (interrupt) or take this (steer).
    `epoch` is the session's, read under its row lock in this transaction: only a turn
    claimed at it (or later) obeys. A signal nobody takes is harmless: the item is queued
    and a later turn answers it."""
    action = arrival_action(mode)
    if action == "abort":
        uow.after_commit(partial(arrivals.request_abort, session_id, epoch=epoch))
    elif action == "steer":
        message = QueryMessage(
            text=event.text or "",
            source=event.source or MessageSource.HUMAN,
            event_id=event.id,
            queue_item_id=item_id,
            platform=event.platform,
            sender_name=event.sender_name,
            sender_id=event.sender_id,
            occurred_at=event.occurred_at,
            attachments=event.attachments,
            extends_answer=mode == QueueMode.STEER,
            model_overrides=event.model_overrides,
        )
        uow.after_commit(partial(arrivals.steer, session_id, message, epoch=epoch))
