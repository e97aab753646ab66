"""The operator's reads and the one operator write on the queue: dead letters (listed, and
replayed as a new item), queue depths per session, and the timer's last tick."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import aliased

from nexus.ids import Clock
from nexus.ledger.enums import QueueStatus
from nexus.ledger.records import QueueItemRecord
from nexus.ledger.repository._sql import columns_for, past_key, to_record
from nexus.ledger.repository.tables import events, queue_items, sessions, timer_state

# Where a replay says which dead item it stands for. Statuses only move forward, so a dead
# item stays dead; its replay is a new item, found again through this key.
REPLAY_OF = "replay_of"
_replays = aliased(queue_items, name="replays")
_replay_of = _replays.c.payload[REPLAY_OF].as_string()


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered queue item, where it was, why it died, and its replay if any."""

    id: str
    session: str
    session_id: str
    event_id: str | None
    mode: str
    attempts: int
    detail: str | None
    text: str | None
    enqueued_at: int
    dead_at: int
    replayed_as: str | None


@dataclass(frozen=True)
class SessionDepth:
    session: str
    queued: int
    claimed: int
    oldest_queued_at: int | None


_REPLAYED_AS = (
    select(func.min(_replays.c.id))
    .where(_replays.c.session_id == queue_items.c.session_id)
    .where(_replay_of == queue_items.c.id)
    .correlate(queue_items)
    .scalar_subquery()
)
_DEAD = (
    select(
        queue_items.c.id,
        sessions.c.label.label("session"),
        queue_items.c.session_id,
        queue_items.c.event_id,
        queue_items.c.mode,
        queue_items.c.attempts,
        queue_items.c.disposition_detail.label("detail"),
        func.coalesce(events.c.text, queue_items.c.payload["text"].as_string()).label("text"),
        queue_items.c.enqueued_at,
        queue_items.c.updated_at.label("dead_at"),
        _REPLAYED_AS.label("replayed_as"),
    )
    .select_from(
        queue_items.join(sessions, sessions.c.id == queue_items.c.session_id).outerjoin(
            events, events.c.id == queue_items.c.event_id
        )
    )
    .where(queue_items.c.status == QueueStatus.DEAD)
)


class DeadLetterRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def page(self, *, before: tuple[int, str] | None, limit: int) -> list[DeadLetter]:
        """Dead letters, the most recently dead first, `limit` of them after the cursor
        (the `(dead_at, id)` of the last one shown)."""
        statement = _DEAD
        if before is not None:
            statement = statement.where(
                past_key(queue_items.c.updated_at, queue_items.c.id, before, descending=True)
            )
        rows = self._conn.execute(
            statement.order_by(queue_items.c.updated_at.desc(), queue_items.c.id.desc()).limit(
                limit
            )
        ).mappings()
        return [DeadLetter(**row) for row in rows]

    def get(self, item_id: str) -> DeadLetter | None:
        row = self._conn.execute(_DEAD.where(queue_items.c.id == item_id)).mappings().one_or_none()
        return None if row is None else DeadLetter(**row)

    def lock(self, item_id: str) -> QueueItemRecord | None:
        """The dead item, held until the transaction ends: two replays of one dead letter
        take turns, and the second finds the first's replay."""
        row = self._conn.execute(
            select(*columns_for(queue_items, QueueItemRecord))
            .where(queue_items.c.id == item_id)
            .where(queue_items.c.status == QueueStatus.DEAD)
            .with_for_update()
        ).one_or_none()
        return None if row is None else to_record(QueueItemRecord, row)

    def replay_of(self, item: QueueItemRecord) -> str | None:
        """The item replaying this dead one, if it was replayed."""
        found = self._conn.execute(
            select(func.min(_replays.c.id))
            .where(_replays.c.session_id == item.session_id)
            .where(_replay_of == item.id)
        ).scalar_one_or_none()
        return None if found is None else str(found)

    def count(self) -> tuple[int, int]:
        """How many items are dead, and how many of those were never replayed."""
        (row,) = self._conn.execute(
            select(func.count(), func.count().filter(_REPLAYED_AS.is_(None))).where(
                queue_items.c.status == QueueStatus.DEAD
            )
        ).all()
        return int(row[0]), int(row[1])

    def queue_depths(self, *, limit: int) -> list[SessionDepth]:
        """The sessions with open items (queued or claimed), the deepest first."""
        status = queue_items.c.status
        queued = func.count().filter(status == QueueStatus.QUEUED)
        rows = self._conn.execute(
            select(
                sessions.c.label.label("session"),
                queued.label("queued"),
                func.count().filter(status == QueueStatus.CLAIMED).label("claimed"),
                func.min(queue_items.c.enqueued_at)
                .filter(status == QueueStatus.QUEUED)
                .label("oldest_queued_at"),
            )
            .select_from(queue_items.join(sessions, sessions.c.id == queue_items.c.session_id))
            .where(status.in_([QueueStatus.QUEUED, QueueStatus.CLAIMED]))
            .group_by(sessions.c.label)
            .order_by(queued.desc(), sessions.c.label)
            .limit(limit)
        ).mappings()
        return [SessionDepth(**row) for row in rows]

    def queue_totals(self) -> dict[str, Any]:
        """Open items in every session: queued, claimed, and when the oldest queued came."""
        status = queue_items.c.status
        (row,) = self._conn.execute(
            select(
                func.count().filter(status == QueueStatus.QUEUED),
                func.count().filter(status == QueueStatus.CLAIMED),
                func.min(queue_items.c.enqueued_at).filter(status == QueueStatus.QUEUED),
                func.count(func.distinct(queue_items.c.session_id)),
            ).where(status.in_([QueueStatus.QUEUED, QueueStatus.CLAIMED]))
        ).all()
        return {
            "queued": int(row[0]),
            "claimed": int(row[1]),
            "oldest_queued_at": None if row[2] is None else int(row[2]),
            "sessions": int(row[3]),
        }

    def last_tick(self, name: str) -> tuple[int, int] | None:
        """The timer's watermark (the last minute it ticked) and when it was written; None
        when it never ticked. Read without a lock: a tick in progress is not waited for."""
        row = self._conn.execute(
            select(timer_state.c.last_minute, timer_state.c.updated_at).where(
                timer_state.c.name == name
            )
        ).one_or_none()
        if row is None or row[0] < 0:
            return None
        return int(row[0]), int(row[1])


__all__ = ["REPLAY_OF", "DeadLetter", "DeadLetterRepository", "SessionDepth"]
