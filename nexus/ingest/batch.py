"""One router run's batch: waiting events claimed and routed in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from nexus.access.policy import Policy, Principal, decide
from nexus.arrival.service import DENIED, QUEUED, ArrivalSignals, queue_for
from nexus.arrival.settings import (
    SHIPPED_QUEUE_POLICY,
    Arrival,
    QueuePolicy,
    archived_reason,
    arrival,
    delivery_for,
    principal_for,
)
from nexus.db import UnitOfWork
from nexus.ledger.enums import HookObligation, SessionOrigin, SessionStatus
from nexus.ledger.records import EventRecord, NewSession, QueueItemRecord, SessionRecord

# Events one router run takes: enough that a burst costs a few runs, few enough that one
# transaction stays short.
ROUTE_BATCH = 50


@dataclass(frozen=True)
class ProcessedEvent:
    """What the router made of one event: queued for a session, or denied (and why)."""

    event_id: str
    disposition: Literal["queued", "denied", "already processed"]
    session_id: str | None = None
    session_label: str | None = None
    queue_item_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Drained:
    """What one router run routed, and the sessions that now have work (each once).
    `alone`: for a session whose whole queue, as a session run would read it, is the one
    item this run queued, that item and its event as claimed here (its disposition written
    since): a run claiming in this transaction need not read the queue. `owing_hooks`: the
    events whose hook evaluation is due, as claimed."""

    events: tuple[ProcessedEvent, ...]
    sessions: tuple[str, ...]
    alone: dict[str, tuple[QueueItemRecord, EventRecord]] = field(default_factory=dict)
    owing_hooks: frozenset[str] = frozenset()


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
        if session.status != SessionStatus.ACTIVE:
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
        queued = queue_for(
            uow,
            sessions[session_id],
            arrivals_for,
            signals=arrivals,
            doorbell=None,  # the router rings each session once, or runs it, after commit
            locked=session_id in locked,
            settle=settle,
        )
        events = [came.event for came in arrivals_for if came.event is not None]
        if queued.alone is not None:
            alone[session_id] = (queued.alone, events[0])
        for event, item_id in zip(events, queued.item_ids, strict=True):
            results[event.id] = ProcessedEvent(
                event.id, "queued", session_id, sessions[session_id].label, item_id
            )
    if not ordered:  # nothing was queued (every event denied): no enqueue to ride with
        uow.ledger.events.mark_many_processed(outcomes)
    return Drained(
        events=tuple(results[event.id] for event, _ in waiting),
        sessions=tuple(plan),
        alone=alone,
        owing_hooks=frozenset(
            event.id for event, _ in waiting if event.hooks_status == HookObligation.DUE
        ),
    )
