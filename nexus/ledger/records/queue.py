"""Queue items, new and stored, and a session's open work."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nexus.ledger.enums import Disposition, MessageSource, QueueMode, QueueStatus
from nexus.ledger.records.base import Record


class NewQueueItem(Record):
    session_id: str
    mode: QueueMode
    event_id: str | None = None
    priority: int = 0
    source: MessageSource | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    available_at: int | None = None


class QueueItemRecord(Record):
    id: str
    session_id: str
    event_id: str | None
    mode: QueueMode
    priority: int
    source: MessageSource | None
    payload: dict[str, Any]
    status: QueueStatus
    attempts: int
    claimed_epoch: int | None
    claim_expires_at: int | None
    available_at: int
    disposition: Disposition | None
    disposition_detail: str | None
    consumed_by_turn_id: str | None
    enqueued_at: int


class OpenWork(Record):
    """A session's unsettled queue as the watchdog sees it: whether a run claimed some of
    it, and since when its oldest due queued item waits (None: none is due)."""

    session_id: str
    claimed: bool
    due_at: int | None
