"""Posting a message into a session's queue from inside the system (no platform webhook)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import MessageSource, QueueMode
from nexus.ledger.hook_lineage import LINEAGE
from nexus.ledger.records import EventDraft, NewQueueItem

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
    lineage: Sequence[str] = (),
) -> bool:
    """An agent event (deterministic id: posting twice is posting once) queued to the
    session; the session's doorbell rings after commit. False if it was posted before.
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
    uow.ledger.events.mark_processed(event_id, "queued", f"session {session_id}")
    _, created = uow.ledger.queue.enqueue(
        NewQueueItem(
            session_id=session_id, event_id=event_id, mode=mode, source=MessageSource.AGENT
        )
    )
    if created and doorbell is not None:
        uow.after_commit(partial(doorbell.session_has_work, session_id))
    if doorbell is not None:  # no router runs the hooks for it: ring them
        uow.after_commit(partial(doorbell.hooks_due, event_id))
    return True
