"""Posting a message into a session's queue from inside the system (no platform webhook)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from nexus.arrival.service import DENIED, QUEUED, ArrivalSignals, queue_for
from nexus.arrival.settings import SHIPPED_QUEUE_POLICY, QueuePolicy, arrival
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import MessageSource, QueueMode, SessionStatus
from nexus.ledger.hook_lineage import LINEAGE
from nexus.ledger.records import EventDraft
from nexus.ledger.repository import NotFound

AGENT = "agent"


def post(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    *,
    session_id: str,
    event_id: str,
    text: str,
    payload: dict[str, Any],
    mode: QueueMode = QueueMode.FOLLOWUP,
    signals: ArrivalSignals | None = None,
    queueing: QueuePolicy = SHIPPED_QUEUE_POLICY,
    lineage: Sequence[str] = (),
) -> bool:
    """An agent event (deterministic id: posting twice is posting once) queued to the
    session through the one way in (its cap, its running turn's signals, its stream); the
    session's doorbell rings after commit. False if it was posted before. An archived
    session takes nothing: the event is kept with that disposition, and False.
    `lineage`: the hooks whose firings caused it (`events.hook_lineage` of the turn that
    posts it), which never evaluate it; like every inbound event, it owes the rest of the
    hooks an evaluation, due from this commit."""
    if lineage:
        payload = {**payload, LINEAGE: list(lineage)}
    stored = uow.ledger.events.insert(
        EventDraft(
            id=event_id,
            adapter=AGENT,
            platform=AGENT,
            source=MessageSource.AGENT,
            text=text,
            occurred_at=uow.ledger.clock(),
            payload=payload,
        )
    )
    if not stored:
        return False
    session = uow.ledger.sessions.get(session_id)
    event = uow.ledger.events.get(event_id)
    if session is None or event is None:
        raise NotFound(f"no session with id {session_id!r}")
    if session.status != SessionStatus.ACTIVE:
        why = f"session {session.label} is {session.status}"
        uow.ledger.events.mark_processed(event_id, DENIED, why)
        return False
    uow.ledger.events.mark_processed(event_id, QUEUED, f"session {session.label}")
    came = arrival(session, None, event, queueing, mode=mode)
    queue_for(uow, session, [came], signals=signals, doorbell=doorbell)
    if doorbell is not None:  # no router runs the hooks for it: ring them
        uow.after_commit(partial(doorbell.hooks_due, event_id))
    return True
