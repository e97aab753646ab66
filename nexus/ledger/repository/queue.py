"""The durable per-session queue: enqueue, claim under an epoch, release, dispose, reap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, func, select, update

from nexus.ids import Clock, new_id
from nexus.ledger.enums import Disposition, QueueStatus
from nexus.ledger.records import EventRecord, NewQueueItem, QueueItemRecord
from nexus.ledger.repository import driver
from nexus.ledger.repository._sql import one_record, to_record
from nexus.ledger.repository.errors import NotFound
from nexus.ledger.repository.events import MARK_PROCESSED
from nexus.ledger.repository.queue_recovery import QueueRecovery
from nexus.ledger.repository.queue_sql import (
    CLAIM_FOR_RUN,
    CLAIM_IDS,
    COUNT_QUEUED,
    ENQUEUE,
    ENQUEUE_COUNTING,
    ENQUEUE_COUNTING_SETTLING,
    ENQUEUED_ID,
    EVENT_FIELDS,
    FOR_SESSION,
    FOR_SESSION_IN,
    FOR_SESSION_WITH,
    ITEM_FIELDS,
    OPEN_FOR_RUN,
    SESSION_EPOCH,
)
from nexus.ledger.repository.sessions import BUMP_EPOCH
from nexus.ledger.repository.tables import queue_items

_FINAL = {
    QueueStatus.DONE: {Disposition.CONSUMED, Disposition.BATCHED, Disposition.INJECTED},
    QueueStatus.DROPPED: {Disposition.DROPPED, Disposition.CANCELLED, Disposition.DENIED},
    QueueStatus.DEAD: {Disposition.DEAD_LETTERED},
}


class Enqueued(NamedTuple):
    """An enqueue's item, whether the call created it, and how many of its session's items
    wait (queued, not claimed) with it: what the queue cap is checked against. `alone` is
    the new item as stored when it is all a session run would find (nothing else queued or
    claimed, no dropped item still owed its summary); None when there is more, or when
    the backend does not say (SQLite)."""

    item_id: str
    created: bool
    waiting: int
    alone: QueueItemRecord | None = None


class QueueRepository(QueueRecovery):
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock
        self._postgres = connection.dialect.name == "postgresql"

    def enqueue(self, item: NewQueueItem) -> tuple[str, bool]:
        """Queue an input; routing one event to one session twice yields one item.

        Returns the item's id and whether this call created it.
        """
        inserted = driver.rows(self._conn, ENQUEUE(self._conn), self._enqueue_params(item))
        if inserted:
            return str(inserted[0]["id"]), True
        return self._enqueued_id(item), False

    def enqueue_counting(
        self,
        item: NewQueueItem,
        *,
        summary_marker: str,
        settle: Sequence[tuple[str, str, str | None]] = (),
    ) -> Enqueued:
        """`enqueue`, and how many of the session's items then wait: one statement on
        Postgres (two on SQLite, in-process), which also says whether the new item is
        `alone` (dropped items owing their summary end their detail with `summary_marker`,
        as `open_for_run` reads them) and writes what became of the events in `settle`
        (`events.mark_many_processed`'s rows: a router batch's last enqueue). The caller
        holds the session's lock, taken by an earlier statement: a statement that waited
        for the lock would still count as of when it started, missing what the router it
        waited for queued."""
        if not self._postgres:
            item_id, created = self.enqueue(item)
            waiting = self.count_queued(item.session_id)
            if settle:
                now = self._clock()
                rows = [
                    {"event_id": e, "outcome": d, "outcome_detail": t, "now": now}
                    for e, d, t in settle
                ]
                driver.execute(self._conn, MARK_PROCESSED, rows)
            return Enqueued(item_id, created, waiting)
        params: dict[str, Any] = {**self._enqueue_params(item), "marker": summary_marker}
        statement = ENQUEUE_COUNTING(self._conn)
        if settle:
            statement = ENQUEUE_COUNTING_SETTLING(self._conn)
            params["settle_ids"] = [event_id for event_id, _, _ in settle]
            params["settle_outcomes"] = [outcome for _, outcome, _ in settle]
            params["settle_details"] = [detail for _, _, detail in settle]
        (row,) = driver.rows(self._conn, statement, params)
        waiting = int(row["queued"])
        if row["q_id"] is None:
            return Enqueued(self._enqueued_id(item), False, waiting)
        stored = QueueItemRecord.model_validate({n: row[f"q_{n}"] for n in ITEM_FIELDS})
        alone = waiting == 1 and row["claimed"] == 0 and row["owed"] == 0
        return Enqueued(stored.id, True, waiting, stored if alone else None)

    def _enqueue_params(self, item: NewQueueItem) -> dict[str, Any]:
        now = self._clock()
        return {
            "item_id": new_id(),
            "item_session": item.session_id,
            "item_event": item.event_id,
            "item_mode": item.mode,
            "item_priority": item.priority,
            "item_source": item.source,
            "item_payload": item.payload,
            "item_available_at": item.available_at if item.available_at is not None else now,
            "item_now": now,
        }

    def _enqueued_id(self, item: NewQueueItem) -> str:
        existing = self._conn.execute(
            ENQUEUED_ID, {"item_session": item.session_id, "item_event": item.event_id}
        ).scalar_one()
        return str(existing)

    def claim(
        self, session_id: str, *, epoch: int, lease_ms: int, limit: int = 1
    ) -> list[QueueItemRecord]:
        """Claim up to `limit` ready items, highest priority then arrival order.

        Each claim counts as an attempt; a claim that is neither disposed nor released
        before `lease_ms` passes is returned to the queue (or dead-lettered) by `reap`.
        """
        now = self._clock()
        candidates = (
            select(queue_items.c.id)
            .where(queue_items.c.session_id == session_id)
            .where(queue_items.c.status == QueueStatus.QUEUED)
            .where(queue_items.c.available_at <= now)
            .order_by(queue_items.c.priority.desc(), queue_items.c.enqueued_at, queue_items.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        ids = list(self._conn.execute(candidates).scalars())
        if not ids:
            return []
        return self.claim_ids(ids, epoch=epoch, lease_ms=lease_ms)

    def claim_ids(
        self, item_ids: Sequence[str], *, epoch: int, lease_ms: int
    ) -> list[QueueItemRecord]:
        """Claim exactly these queued items (the queue-mode decision chose them), in order."""
        now = self._clock()
        rows = self._conn.execute(
            CLAIM_IDS,
            {
                "claim_items": list(item_ids),
                "claim_epoch": epoch,
                "claim_expires": now + lease_ms,
                "claim_now": now,
            },
        ).all()
        order = {item_id: index for index, item_id in enumerate(item_ids)}
        return sorted((to_record(QueueItemRecord, r) for r in rows), key=lambda r: order[r.id])

    def claim_for_run(
        self, session_id: str, item_ids: Sequence[str], *, lease_ms: int
    ) -> tuple[int, list[QueueItemRecord]]:
        """Start a run's turn: bump the session's fencing epoch and claim exactly these queued
        items under it. Returns the epoch and the items claimed (in the given order). One
        statement on Postgres (the epoch bump as a data-modifying CTE); two on SQLite."""
        if self._conn.dialect.name != "postgresql":
            epoch = self._conn.execute(
                BUMP_EPOCH, {"bump_session": session_id}
            ).scalar_one_or_none()
            if epoch is None:
                raise NotFound(f"no session with id {session_id!r}")
            return int(epoch), self.claim_ids(item_ids, epoch=int(epoch), lease_ms=lease_ms)
        now = self._clock()
        rows = driver.rows(
            self._conn,
            CLAIM_FOR_RUN,
            {
                "bump_session": session_id,
                "run_items": list(item_ids),
                "run_expires_at": now + lease_ms,
                "run_now": now,
            },
        )
        if not rows:  # nothing claimed (taken meanwhile): the epoch moved on all the same
            epoch = self._conn.execute(
                SESSION_EPOCH, {"bump_session": session_id}
            ).scalar_one_or_none()
            if epoch is None:
                raise NotFound(f"no session with id {session_id!r}")
            return int(epoch), []
        order = {item_id: index for index, item_id in enumerate(item_ids)}
        found = [QueueItemRecord.model_validate(row) for row in rows]
        return int(rows[0]["claimed_epoch"]), sorted(found, key=lambda item: order[item.id])

    def release(self, item_ids: Sequence[str], *, epoch: int, retry_at: int | None = None) -> int:
        """Hand claimed items back to the queue (a preempted or failed run), optionally not
        before `retry_at`."""
        values: dict[str, object] = {
            "status": QueueStatus.QUEUED,
            "claim_expires_at": None,
            "updated_at": self._clock(),
        }
        if retry_at is not None:
            values["available_at"] = retry_at
        result = self._conn.execute(
            update(queue_items)
            .where(queue_items.c.id.in_(list(item_ids)))
            .where(queue_items.c.status == QueueStatus.CLAIMED)
            .where(queue_items.c.claimed_epoch == epoch)
            .values(values)
        )
        return int(result.rowcount)

    def dispose(
        self,
        item_ids: Sequence[str],
        *,
        status: QueueStatus,
        disposition: Disposition,
        detail: str | None = None,
        only_waiting: bool = False,
    ) -> int:
        """Give open items their final disposition; items already final are left alone.

        `only_waiting` leaves claimed items alone too: a run may be answering them now.
        """
        if disposition not in _FINAL.get(status, set()):
            raise ValueError(f"disposition {disposition.value!r} does not end in {status.value!r}")
        open_statuses = (
            [QueueStatus.QUEUED]
            if only_waiting
            else [
                QueueStatus.QUEUED,
                QueueStatus.CLAIMED,
            ]
        )
        result = self._conn.execute(
            update(queue_items)
            .where(queue_items.c.id.in_(list(item_ids)))
            .where(queue_items.c.status.in_(open_statuses))
            .values(
                status=status,
                disposition=disposition,
                disposition_detail=detail,
                claim_expires_at=None,
                updated_at=self._clock(),
            )
        )
        return int(result.rowcount)

    def get(self, item_id: str) -> QueueItemRecord | None:
        return one_record(self._conn, queue_items, QueueItemRecord, queue_items.c.id == item_id)

    def for_session(
        self, session_id: str, *, statuses: Sequence[QueueStatus] | None = None
    ) -> list[QueueItemRecord]:
        """The session's items in queue order, optionally only those with given statuses."""
        if statuses and len(statuses) == 1:
            found = driver.rows(
                self._conn, FOR_SESSION_WITH, {"session_id": session_id, "status": statuses[0]}
            )
            return [QueueItemRecord.model_validate(row) for row in found]
        if statuses:
            rows = self._conn.execute(
                FOR_SESSION_IN, {"session_id": session_id, "statuses": list(statuses)}
            )
        else:  # an empty list filters nothing, like None
            rows = self._conn.execute(FOR_SESSION, {"session_id": session_id})
        return [to_record(QueueItemRecord, row) for row in rows]

    def open_for_run(
        self, session_id: str, *, summary_marker: str
    ) -> list[tuple[QueueItemRecord, EventRecord | None]]:
        """What a session run looks at before each claim, in one round trip and queue order:
        the open items (queued and claimed) and the dropped ones whose summary is still owed
        (their detail ends with `summary_marker`, a plain text with no LIKE wildcards),
        each with its event."""
        rows = driver.rows(
            self._conn, OPEN_FOR_RUN, {"session_id": session_id, "marker": summary_marker}
        )
        found: list[tuple[QueueItemRecord, EventRecord | None]] = []
        for mapping in rows:
            item = QueueItemRecord.model_validate({n: mapping[f"q_{n}"] for n in ITEM_FIELDS})
            event = None
            if mapping["e_id"] is not None:
                event = EventRecord.model_validate({n: mapping[f"e_{n}"] for n in EVENT_FIELDS})
            found.append((item, event))
        return found

    def count_queued(self, session_id: str) -> int:
        """How many of the session's items wait (queued, not claimed)."""
        (row,) = driver.rows(self._conn, COUNT_QUEUED, {"session_id": session_id})
        return int(next(iter(row.values())))

    def count_open(self, session_id: str) -> int:
        return int(
            self._conn.execute(
                select(func.count())
                .select_from(queue_items)
                .where(queue_items.c.session_id == session_id)
                .where(queue_items.c.status.in_([QueueStatus.QUEUED, QueueStatus.CLAIMED]))
            ).scalar_one()
        )

    def dropped_pending_summary(self, session_id: str, *, marker: str) -> list[QueueItemRecord]:
        """Dropped items whose detail says their summary is still owed, oldest first."""
        return [
            item
            for item in self.for_session(session_id, statuses=[QueueStatus.DROPPED])
            if (item.disposition_detail or "").endswith(marker)
        ]

    def mark_summarized(self, item_ids: Sequence[str], *, marker: str) -> None:
        """The owed summary was written: the detail says so (the disposition stays)."""
        for item in (self.get(item_id) for item_id in item_ids):
            if item is None or not (item.disposition_detail or "").endswith(marker):
                continue
            detail = (item.disposition_detail or "")[: -len(marker)] + "; summarized"
            self._conn.execute(
                update(queue_items)
                .where(queue_items.c.id == item.id)
                .values(disposition_detail=detail, updated_at=self._clock())
            )
