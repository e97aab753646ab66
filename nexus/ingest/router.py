"""The router (`nexus.event.process`): identity → policy → session → queue item."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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
    QueueItemRecord,
    SessionRecord,
)
from nexus.ledger.repository import NotFound
from nexus.queueing.modes import arrival_action
from nexus.queueing.overflow import SUMMARY_PENDING, Overflow, drop_over_cap
from nexus.queueing.settings import (
    item_payload,
)

QUEUED, DENIED = "queued", "denied"
# Events one router run takes: enough that a burst costs a few runs, few enough that one
# transaction stays short.
ROUTE_BATCH = 50


class ArrivalSignals(Protocol):
    """How an arriving message reaches a turn already running, and the session's stream
    (the coordination port)."""

    def request_abort(self, session_id: str) -> None: ...

    def steer(self, session_id: str, message: QueryMessage) -> None: ...

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


@dataclass(frozen=True)
class Drained:
    """What one router run routed, and the sessions that now have work (each once).
    `alone`: for a session whose whole queue, as a session run would read it, is the one
    item this run queued, that item and its event as claimed here (its disposition written
    since): a run claiming in this transaction need not read the queue."""

    events: tuple[ProcessedEvent, ...]
    sessions: tuple[str, ...]
    alone: dict[str, tuple[QueueItemRecord, EventRecord]] = field(default_factory=dict)


def route_waiting(
    uow: UnitOfWork,
    policies: Sequence[Policy],
    *,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy = SHIPPED_QUEUE_POLICY,
    limit: int = ROUTE_BATCH,
) -> Drained:
    """Route up to `limit` waiting events that no other router holds, in the caller's one
    transaction. The caller commits, then rings each session in `sessions` (once, however
    many of its messages this run queued) or runs one itself.

    A burst from one sender costs its identity, policy and session reads once, and each
    session's lock and cap once: the per-event work is the queue item itself."""
    waiting = uow.ledger.events.claim_waiting(limit=limit)
    # One event has one session, so no lock order to keep: its session is locked as it is
    # resolved, a round trip less than locking it apart (below).
    lock_as_resolved = len(waiting) == 1
    locked: set[str] = set()
    principals: dict[tuple[str, str | None], Principal] = {}
    personas: dict[str, str] = {}
    by_key: dict[str, SessionRecord] = {}
    plan: dict[str, list[Arrival]] = {}  # session id → its events
    results: dict[str, ProcessedEvent] = {}
    outcomes: list[tuple[str, str, str | None]] = []
    for event, contact_entity in waiting:
        sender = (event.platform, event.sender_id)
        if sender not in principals:
            principals[sender] = principal_for(uow, event, contact_entity)
        decision = decide(policies, principals[sender], delivery_for(event))
        if not decision.allowed or decision.session_key is None or decision.persona is None:
            reason = f"{decision.reason} (policy {decision.policy or 'none'})"
            results[event.id] = ProcessedEvent(event.id, "denied", reason=reason)
            outcomes.append((event.id, DENIED, reason))
            continue
        session = by_key.get(decision.session_key)
        if session is None:
            # The persona is looked up only for a session that does not exist yet.
            session = uow.ledger.sessions.resolve(decision.session_key, lock=lock_as_resolved)
            if session is not None and lock_as_resolved:
                locked.add(session.id)
        if session is None:
            if decision.persona not in personas:
                personas[decision.persona] = uow.ledger.agents.ensure(decision.persona).id
            session = uow.ledger.sessions.ensure(
                NewSession(
                    label=decision.session_key,
                    persona_id=personas[decision.persona],
                    origin=SessionOrigin.USER,
                    routing_key=decision.session_key,
                    source_event_id=event.id,
                )
            )
        by_key[decision.session_key] = session
        if session.status == SessionStatus.ARCHIVED:
            reason = archived_reason(session)
            results[event.id] = ProcessedEvent(event.id, "denied", reason=reason)
            outcomes.append((event.id, DENIED, reason))
            continue
        plan.setdefault(session.id, []).append(arrival(session, decision, event, queueing))
        outcomes.append((event.id, QUEUED, f"session {session.label}"))
    sessions = {s.id: s for s in by_key.values()}
    alone: dict[str, tuple[QueueItemRecord, EventRecord]] = {}
    # Locked in one order (by id) by every router: two runs each holding one session that
    # the other wants next would deadlock, and Postgres breaks that only after a second.
    ordered = sorted(plan.items())
    for position, (session_id, arrivals_for) in enumerate(ordered):
        # The batch's last enqueue writes every event's disposition too: a statement less.
        settle = outcomes if position == len(ordered) - 1 else ()
        items, only = _queue_many(
            uow,
            sessions[session_id],
            arrivals_for,
            arrivals,
            locked=session_id in locked,
            settle=settle,
        )
        if only is not None:
            alone[session_id] = (only, arrivals_for[0].event)
        for came, item_id in zip(arrivals_for, items, strict=True):
            results[came.event.id] = ProcessedEvent(
                came.event.id, "queued", session_id, sessions[session_id].label, item_id
            )
    if not ordered:  # nothing was queued (every event denied): no enqueue to ride with
        uow.ledger.events.mark_many_processed(outcomes)
    return Drained(
        events=tuple(results[event.id] for event, _ in waiting), sessions=tuple(plan), alone=alone
    )


def _queue_many(
    uow: UnitOfWork,
    session: SessionRecord,
    events: Sequence[Arrival],
    arrivals: ArrivalSignals | None,
    *,
    locked: bool = False,
    settle: Sequence[tuple[str, str, str | None]] = (),
) -> tuple[list[str], QueueItemRecord | None]:
    """`queue_into` for several events of one session: one lock (none when `locked`: the
    caller holds it), one cap decision (under the settings the first of them arrived with,
    counted with the last enqueue), and at most one abort signal however many interrupting
    messages arrived. `settle`: what became of the router batch's events, written by the
    last enqueue. Returns the items, and the one item when it is all the session has open
    (`Enqueued.alone`)."""
    if not locked:
        uow.ledger.sessions.lock(session.id)
    item_ids: list[str] = []
    queued: list[tuple[str, EventRecord, QueueMode]] = []
    abort = False
    waiting: int | None = None
    alone: QueueItemRecord | None = None
    for position, came in enumerate(events):
        event, mode = came.event, came.mode
        if position == len(events) - 1:
            item_id, created, waiting, alone = uow.ledger.queue.enqueue_counting(
                _item(session, came), summary_marker=SUMMARY_PENDING, settle=settle
            )
        else:
            item_id, created = uow.ledger.queue.enqueue(_item(session, came))
        item_ids.append(item_id)
        if created:
            queued.append((item_id, event, mode))
        if created and arrivals is not None:
            if arrival_action(mode) == "abort":
                abort = True
            else:
                _signal_running_turn(uow, arrivals, session.id, mode, event, item_id)
    limits = events[0].settings
    dropped = drop_over_cap(
        uow, session.id, cap=limits.cap.value, policy=limits.drop.value, waiting=waiting
    )
    if arrivals is not None:
        if abort:  # first: a running turn stops sooner
            uow.after_commit(partial(arrivals.request_abort, session.id))
        _announce(uow, arrivals, session.id, queued, dropped)
    # What the cap dropped is no longer the item alone (and it owes a summary now).
    return item_ids, alone if len(events) == 1 and not dropped.item_ids else None


def _item(session: SessionRecord, came: Arrival) -> NewQueueItem:
    return NewQueueItem(
        session_id=session.id,
        event_id=came.event.id,
        mode=came.mode,
        source=came.event.source,
        payload=item_payload(came.settings),
    )


def _announce(
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
    uow.ledger.sessions.lock(session.id)
    item_id, created, waiting, _ = uow.ledger.queue.enqueue_counting(
        _item(session, came), summary_marker=SUMMARY_PENDING
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
            _signal_running_turn(uow, arrivals, session.id, mode, event, item_id)
            _announce(uow, arrivals, session.id, [(item_id, event, mode)], dropped)
    return item_id, created


def _signal_running_turn(
    uow: UnitOfWork,
    arrivals: ArrivalSignals,
    session_id: str,
    mode: QueueMode,
    event: EventRecord,
    item_id: str,
) -> None:
    """After commit, tell a turn that may be running: stop (interrupt) or take this (steer).
    A signal nobody takes is harmless: the item is queued and a later turn answers it."""
    action = arrival_action(mode)
    if action == "abort":
        uow.after_commit(partial(arrivals.request_abort, session_id))
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
        uow.after_commit(partial(arrivals.steer, session_id, message))
