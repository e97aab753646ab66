"""The queue's recovery: sessions owed a run, claims that outlived their run put back, and
a fenced run's claim handed back with its attempt."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, Connection, case, func, select, update

from nexus.ids import Clock
from nexus.ledger.enums import Disposition, QueueStatus
from nexus.ledger.records import OpenWork, QueueItemRecord
from nexus.ledger.repository import driver
from nexus.ledger.repository._sql import to_record
from nexus.ledger.repository.queue_sql import FOR_SESSION_WITH, HELD, STILL_OWING
from nexus.ledger.repository.tables import queue_items


class QueueRecovery:
    """The queue repository's recovery half (`QueueRepository` is one)."""

    _conn: Connection
    _clock: Clock

    def reap(self, *, max_attempts: int) -> tuple[int, int]:
        """Return expired claims to the queue, or dead-letter those out of attempts.

        Returns (requeued, dead_lettered).
        """
        now = self._clock()
        expired = (queue_items.c.status == QueueStatus.CLAIMED) & (
            queue_items.c.claim_expires_at < now
        )
        why = f"claim expired after {max_attempts} attempts"
        return self._put_back(expired, max_attempts=max_attempts, why=why, now=now)

    def sessions_with_ready_work(self, *, limit: int = 1000) -> list[str]:
        """Sessions holding queued items that are due now (the relay re-rings these)."""
        return list(
            self._conn.execute(
                select(queue_items.c.session_id)
                .where(queue_items.c.status == QueueStatus.QUEUED)
                .where(queue_items.c.available_at <= self._clock())
                .group_by(queue_items.c.session_id)
                .order_by(func.min(queue_items.c.enqueued_at))
                .limit(limit)
            ).scalars()
        )

    def open_work(self, *, now_ms: int, limit: int = 1000) -> list[OpenWork]:
        """Per session with claimed items or queued items due by `now_ms`: whether any is
        claimed and since when the oldest due one waits, oldest work first. One statement;
        the status index finds the open items (settled ones, the bulk, are never read)."""
        claimed = queue_items.c.status == QueueStatus.CLAIMED
        due = (queue_items.c.status == QueueStatus.QUEUED) & (queue_items.c.available_at <= now_ms)
        rows = self._conn.execute(
            select(
                queue_items.c.session_id,
                func.max(case((claimed, 1), else_=0)),
                func.min(case((due, queue_items.c.available_at), else_=None)),
            )
            .where(claimed | due)
            .group_by(queue_items.c.session_id)
            .order_by(func.min(queue_items.c.enqueued_at))
            .limit(limit)
        ).all()
        return [OpenWork(session_id=row[0], claimed=bool(row[1]), due_at=row[2]) for row in rows]

    def session_still_owing(self, event_id: str) -> str | None:
        """The session whose queue still holds `event_id` unsettled (queued or claimed)."""
        return self._conn.execute(STILL_OWING, {"owed_event": event_id}).scalar_one_or_none()

    def sessions_owed_a_run(self, *, limit: int = 1000) -> list[str]:
        """Sessions with ready queued items, or with claimed ones (a run that may have died:
        ringing a live run's session is harmless, it answers "busy")."""
        now = self._clock()
        ready = (queue_items.c.status == QueueStatus.QUEUED) & (queue_items.c.available_at <= now)
        return list(
            self._conn.execute(
                select(queue_items.c.session_id)
                .where(ready | (queue_items.c.status == QueueStatus.CLAIMED))
                .group_by(queue_items.c.session_id)
                .order_by(func.min(queue_items.c.enqueued_at))
                .limit(limit)
            ).scalars()
        )

    def reclaim(self, session_id: str, *, max_attempts: int) -> list[QueueItemRecord]:
        """Items a previous run of this session claimed and never settled, back to the queue
        (or dead-lettered once out of attempts). Only the session's lease holder calls this,
        so any claim it finds belongs to a run that died or lost its lease.

        Returns the items as they were claimed (with the epoch of the run that lost them).
        """
        claimed = {"session_id": session_id, "status": QueueStatus.CLAIMED}
        stale = [
            QueueItemRecord.model_validate(row)
            for row in driver.rows(self._conn, FOR_SESSION_WITH, claimed)
        ]
        if not stale:
            return []
        ids = queue_items.c.id.in_([item.id for item in stale])
        why = f"its run ended without settling it {max_attempts} times"
        self._put_back(ids, max_attempts=max_attempts, why=why, now=self._clock())
        return stale

    def held(self, item_ids: Sequence[str], *, epoch: int) -> list[QueueItemRecord]:
        """Which of these items are still claimed under `epoch`, as they are now: what a run
        at that epoch still owns (a run that took over owns the rest)."""
        rows = self._conn.execute(HELD, {"held_items": list(item_ids), "held_epoch": epoch})
        order = {item_id: index for index, item_id in enumerate(item_ids)}
        return sorted((to_record(QueueItemRecord, r) for r in rows), key=lambda r: order[r.id])

    def hand_back_fenced(self, item_ids: Sequence[str], *, epoch: int) -> tuple[int, int]:
        """A run at `epoch` found itself fenced: the items it still holds go back to the
        queue, and the attempt its claim counted is given back on every one of them, also
        those another run took over since, and answered or still holds (their latest claim
        is at `epoch` or later). A dead letter keeps the count it died with
        (`nexus.queueing.attempts.gives_back`, in SQL), and `updated_at` is left alone (a
        dead letter's is when it died).

        Returns (requeued, given back)."""
        ids = list(item_ids)
        now = self._clock()
        requeued = self._conn.execute(
            update(queue_items)
            .where(queue_items.c.id.in_(ids))
            .where(queue_items.c.status == QueueStatus.CLAIMED)
            .where(queue_items.c.claimed_epoch == epoch)
            .values(status=QueueStatus.QUEUED, claim_expires_at=None, updated_at=now)
        ).rowcount
        given_back = self._conn.execute(
            update(queue_items)
            .where(queue_items.c.id.in_(ids))
            .where(queue_items.c.claimed_epoch >= epoch)
            .where(queue_items.c.status != QueueStatus.DEAD)
            .where(queue_items.c.attempts > 0)
            .values(attempts=queue_items.c.attempts - 1)
        ).rowcount
        return int(requeued), int(given_back)

    def _put_back(
        self, claimed: ColumnElement[bool], *, max_attempts: int, why: str, now: int
    ) -> tuple[int, int]:
        """The claimed items `claimed` selects back to the queue, or dead-lettered for `why`
        once out of attempts (`nexus.queueing.attempts.out_of_attempts`, in SQL). Returns
        (requeued, dead_lettered)."""
        dead = self._conn.execute(
            update(queue_items)
            .where(claimed & (queue_items.c.attempts >= max_attempts))
            .values(
                status=QueueStatus.DEAD,
                disposition=Disposition.DEAD_LETTERED,
                disposition_detail=why,
                claim_expires_at=None,
                updated_at=now,
            )
        ).rowcount
        requeued = self._conn.execute(
            update(queue_items)
            .where(claimed & (queue_items.c.status == QueueStatus.CLAIMED))
            .values(status=QueueStatus.QUEUED, claim_expires_at=None, updated_at=now)
        ).rowcount
        return int(requeued), int(dead)
