"""What waits in a session's queue, as people read it (pure): each open item's place in
line and age, and the queue's size and oldest age."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.ledger.enums import OPEN_QUEUE_STATUSES
from nexus.ledger.records import QueueItemRecord


@dataclass(frozen=True)
class Place:
    position: int  # 1 is next (or claimed by the running turn)
    age_ms: int


@dataclass(frozen=True)
class Pending:
    count: int
    oldest_age_ms: int | None


def places(items: Sequence[QueueItemRecord], *, now_ms: int) -> dict[str, Place]:
    """The open items (queued, or claimed by a run) in queue order, numbered from 1; the
    others have no place."""
    waiting = [item for item in items if item.status in OPEN_QUEUE_STATUSES]
    return {
        item.id: Place(position=number, age_ms=max(0, now_ms - item.enqueued_at))
        for number, item in enumerate(waiting, start=1)
    }


def pending(items: Sequence[QueueItemRecord], *, now_ms: int) -> Pending:
    found = places(items, now_ms=now_ms)
    return Pending(
        count=len(found), oldest_age_ms=max((p.age_ms for p in found.values()), default=None)
    )
