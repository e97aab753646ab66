"""Posting a message into a session's queue from inside the system (no platform webhook)."""

from __future__ import annotations

from functools import partial
from typing import Any

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import MessageSource, QueueMode
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
) -> bool:
    """An agent event (deterministic id: posting twice is posting once) queued to the
    session; the session's doorbell rings after commit. False if it was posted before."""
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
    return True
