"""Places in line and ages of what waits in a queue."""

from __future__ import annotations

from nexus.ledger.enums import Disposition, QueueMode, QueueStatus
from nexus.ledger.records import QueueItemRecord
from nexus.queueing.pending import Pending, Place, pending, places


def _item(n: int, status: QueueStatus, enqueued_at: int) -> QueueItemRecord:
    return QueueItemRecord(
        id=f"q{n}",
        session_id="s",
        event_id=None,
        mode=QueueMode.QUEUE,
        priority=0,
        source=None,
        payload={},
        status=status,
        attempts=0,
        claimed_epoch=None,
        claim_expires_at=None,
        available_at=enqueued_at,
        disposition=Disposition.CONSUMED if status == QueueStatus.DONE else None,
        disposition_detail=None,
        consumed_by_turn_id=None,
        enqueued_at=enqueued_at,
    )


def test_open_items_are_numbered_in_queue_order_with_their_ages() -> None:
    items = [
        _item(1, QueueStatus.DONE, 100),
        _item(2, QueueStatus.CLAIMED, 200),
        _item(3, QueueStatus.QUEUED, 900),
    ]
    assert places(items, now_ms=1_000) == {"q2": Place(1, 800), "q3": Place(2, 100)}
    assert pending(items, now_ms=1_000) == Pending(count=2, oldest_age_ms=800)


def test_an_empty_queue_has_no_oldest_age_and_clocks_never_go_negative() -> None:
    assert pending([], now_ms=5) == Pending(count=0, oldest_age_ms=None)
    future = [_item(1, QueueStatus.QUEUED, 10_000)]
    assert places(future, now_ms=5) == {"q1": Place(1, 0)}
