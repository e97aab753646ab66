"""One router run's batch: waiting events claimed and routed in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from nexus.access.policy import Policy, Principal, decide
from nexus.db import UnitOfWork
from nexus.ingest.arrival import (
    SHIPPED_QUEUE_POLICY,
    Arrival,
    QueuePolicy,
    archived_reason,
    arrival,
)
from nexus.ingest.router import (
    DENIED,
    QUEUED,
    ArrivalSignals,
    ProcessedEvent,
    announce,
    delivery_for,
    principal_for,
    queue_item,
    signal_running_turn,
)
from nexus.ledger.enums import HookObligation, QueueMode, SessionOrigin, SessionStatus
from nexus.ledger.records import EventRecord, NewSession, QueueItemRecord, SessionRecord
from nexus.queueing.modes import arrival_action
from nexus.queueing.overflow import SUMMARY_PENDING, drop_over_cap

# Events one router run takes: enough that a burst costs a few runs, few enough that one
# transaction stays short.
ROUTE_BATCH = 50


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
        events=tuple(results[event.id] for event, _ in waiting),
        sessions=tuple(plan),
        alone=alone,
        owing_hooks=frozenset(
            event.id for event, _ in waiting if event.hooks_status == HookObligation.DUE
        ),
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
    # The epoch the signals below carry: read under the session's lock (resolved under it
    # when `locked`), so a turn claimed after this transaction obeys none of them.
    epoch = session.epoch if locked else uow.ledger.sessions.lock(session.id)
    item_ids: list[str] = []
    queued: list[tuple[str, EventRecord, QueueMode]] = []
    abort = False
    waiting: int | None = None
    alone: QueueItemRecord | None = None
    for position, came in enumerate(events):
        event, mode = came.event, came.mode
        if position == len(events) - 1:
            item_id, created, waiting, alone = uow.ledger.queue.enqueue_counting(
                queue_item(session, came), summary_marker=SUMMARY_PENDING, settle=settle
            )
        else:
            item_id, created = uow.ledger.queue.enqueue(queue_item(session, came))
        item_ids.append(item_id)
        if created:
            queued.append((item_id, event, mode))
        if created and arrivals is not None:
            if arrival_action(mode) == "abort":
                abort = True
            else:
                signal_running_turn(uow, arrivals, session.id, mode, event, item_id, epoch=epoch)
    limits = events[0].settings
    dropped = drop_over_cap(
        uow, session.id, cap=limits.cap.value, policy=limits.drop.value, waiting=waiting
    )
    if arrivals is not None:
        if abort:  # first: a running turn stops sooner
            uow.after_commit(partial(arrivals.request_abort, session.id, epoch=epoch))
        announce(uow, arrivals, session.id, queued, dropped)
    # What the cap dropped is no longer the item alone (and it owes a summary now).
    return item_ids, alone if len(events) == 1 and not dropped.item_ids else None
