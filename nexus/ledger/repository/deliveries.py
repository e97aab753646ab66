"""Outbound deliveries: chunks recorded before sending, sent in order, statuses forward only."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, and_, exists, select, update
from sqlalchemy.orm import aliased

from nexus.ids import Clock, new_id
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.models import Delivery, table_of
from nexus.ledger.records import DeliveryDraft, DeliveryRecord
from nexus.ledger.repository._sql import columns_for, to_record, upsert_insert

deliveries = table_of(Delivery)
_earlier = aliased(deliveries, name="earlier")

# Reached the platform: later chunks may follow.
LANDED = (DeliveryStatus.SENT, DeliveryStatus.DELIVERED, DeliveryStatus.READ)
# A platform's status callback moves a delivery forward only, never back.
_FORWARD_FROM = {
    DeliveryStatus.SENT: (DeliveryStatus.PENDING, DeliveryStatus.SENDING),
    DeliveryStatus.DELIVERED: (DeliveryStatus.SENDING, DeliveryStatus.SENT),
    DeliveryStatus.READ: (DeliveryStatus.SENDING, DeliveryStatus.SENT, DeliveryStatus.DELIVERED),
    DeliveryStatus.FAILED: (
        DeliveryStatus.SENDING,
        DeliveryStatus.SENT,
        DeliveryStatus.DELIVERED,
    ),
}


def _earlier_chunk_unsent() -> object:
    """An earlier chunk of the same reply has not reached the platform yet."""
    return exists().where(
        and_(
            _earlier.c.turn_id == deliveries.c.turn_id,
            _earlier.c.chunk_index < deliveries.c.chunk_index,
            _earlier.c.status.not_in(LANDED),
        )
    )


class DeliveryRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def add(self, drafts: Sequence[DeliveryDraft]) -> list[str]:
        """Record the chunks of a reply; recording one (turn, chunk) twice records it once.

        Returns the ids of all the reply's chunks, in order."""
        now = self._clock()
        ids: list[str | None] = []
        for draft in drafts:
            statement = upsert_insert(self._conn, deliveries).values(
                id=new_id(),
                status=DeliveryStatus.PENDING,
                attempts=0,
                created_at=now,
                updated_at=now,
                **draft.model_dump(),
            )
            ids.append(
                self._conn.execute(
                    statement.on_conflict_do_nothing(
                        index_elements=["turn_id", "chunk_index"]
                    ).returning(deliveries.c.id)
                ).scalar_one_or_none()
            )
        if not drafts:
            return []
        if all(found is not None for found in ids):
            return [found for found in ids if found is not None]
        # Recorded before (a turn's hooks run again): the chunks already there count.
        return [d.id for d in self.for_turn(drafts[0].turn_id)]

    def get(self, delivery_id: str) -> DeliveryRecord | None:
        row = self._conn.execute(
            select(*columns_for(deliveries, DeliveryRecord)).where(deliveries.c.id == delivery_id)
        ).one_or_none()
        return None if row is None else to_record(DeliveryRecord, row)

    def for_turn(self, turn_id: str) -> list[DeliveryRecord]:
        rows = self._conn.execute(
            select(*columns_for(deliveries, DeliveryRecord))
            .where(deliveries.c.turn_id == turn_id)
            .order_by(deliveries.c.chunk_index)
        )
        return [to_record(DeliveryRecord, row) for row in rows]

    def begin_send(self, delivery_id: str, *, lease_ms: int) -> DeliveryRecord | None:
        """Take a due, pending chunk whose earlier chunks have all landed; count the attempt.

        None when another worker has it, it is not due, or an earlier chunk is still on its
        way. Committed before the platform is called, so a crash mid-send is visible."""
        now = self._clock()
        row = self._conn.execute(
            update(deliveries)
            .where(deliveries.c.id == delivery_id)
            .where(deliveries.c.status == DeliveryStatus.PENDING)
            .where((deliveries.c.next_attempt_at.is_(None)) | (deliveries.c.next_attempt_at <= now))
            .where(~_earlier_chunk_unsent())  # type: ignore[operator]
            .values(
                status=DeliveryStatus.SENDING,
                attempts=deliveries.c.attempts + 1,
                next_attempt_at=now + lease_ms,  # while sending: when the claim lapses
                updated_at=now,
            )
            .returning(*columns_for(deliveries, DeliveryRecord))
        ).one_or_none()
        return None if row is None else to_record(DeliveryRecord, row)

    def mark_sent(self, delivery_id: str, provider_message_id: str | None) -> bool:
        return self._finish(
            delivery_id,
            status=DeliveryStatus.SENT,
            provider_message_id=provider_message_id,
            error=None,
            next_attempt_at=None,
        )

    def retry_at(self, delivery_id: str, at_ms: int, error: str) -> bool:
        return self._finish(
            delivery_id, status=DeliveryStatus.PENDING, error=error, next_attempt_at=at_ms
        )

    def fail(self, delivery_id: str, error: str) -> list[str]:
        """The chunk failed for good, and with it every later chunk of the reply (a reply
        with a hole in it would mislead). Returns the ids failed."""
        record = self.get(delivery_id)
        if record is None or not self._finish(
            delivery_id, status=DeliveryStatus.FAILED, error=error, next_attempt_at=None
        ):
            return []
        later = self._conn.execute(
            update(deliveries)
            .where(deliveries.c.turn_id == record.turn_id)
            .where(deliveries.c.chunk_index > record.chunk_index)
            .where(deliveries.c.status == DeliveryStatus.PENDING)
            .values(
                status=DeliveryStatus.FAILED,
                error=f"not sent: chunk {record.chunk_index} failed ({error})",
                next_attempt_at=None,
                updated_at=self._clock(),
            )
            .returning(deliveries.c.id)
        ).scalars()
        return [delivery_id, *later]

    def next_chunk(self, turn_id: str, after_index: int) -> str | None:
        return self._conn.execute(
            select(deliveries.c.id)
            .where(deliveries.c.turn_id == turn_id)
            .where(deliveries.c.chunk_index == after_index + 1)
        ).scalar_one_or_none()

    def lapsed_sends(self, *, limit: int = 200) -> list[DeliveryRecord]:
        """Chunks whose sender stopped (crashed, killed) before recording the outcome."""
        rows = self._conn.execute(
            select(*columns_for(deliveries, DeliveryRecord))
            .where(deliveries.c.status == DeliveryStatus.SENDING)
            .where(deliveries.c.next_attempt_at < self._clock())
            .order_by(deliveries.c.next_attempt_at)
            .limit(limit)
        )
        return [to_record(DeliveryRecord, row) for row in rows]

    def release_lapsed(self, delivery_id: str) -> bool:
        """Hand a lapsed send back to the queue, due now (an idempotent resend)."""
        return bool(
            self._conn.execute(
                update(deliveries)
                .where(deliveries.c.id == delivery_id)
                .where(deliveries.c.status == DeliveryStatus.SENDING)
                .where(deliveries.c.next_attempt_at < self._clock())
                .values(status=DeliveryStatus.PENDING, next_attempt_at=None)
            ).rowcount
        )

    def due(self, *, limit: int = 500) -> list[str]:
        """Pending chunks that may be sent now (the relay rings these), oldest first."""
        now = self._clock()
        return list(
            self._conn.execute(
                select(deliveries.c.id)
                .where(deliveries.c.status == DeliveryStatus.PENDING)
                .where(
                    (deliveries.c.next_attempt_at.is_(None)) | (deliveries.c.next_attempt_at <= now)
                )
                .where(~_earlier_chunk_unsent())  # type: ignore[operator]
                .order_by(deliveries.c.created_at, deliveries.c.chunk_index)
                .limit(limit)
            ).scalars()
        )

    def advance(self, platform: str, provider_message_id: str, status: DeliveryStatus) -> int:
        """Apply a platform's status callback; a stale or repeated one changes nothing."""
        allowed = _FORWARD_FROM.get(status)
        if not allowed:
            return 0
        values: dict[str, object] = {"status": status, "updated_at": self._clock()}
        return int(
            self._conn.execute(
                update(deliveries)
                .where(deliveries.c.platform == platform)
                .where(deliveries.c.provider_message_id == provider_message_id)
                .where(deliveries.c.status.in_(allowed))
                .values(**values)
            ).rowcount
        )

    def _finish(self, delivery_id: str, **values: object) -> bool:
        """Record an attempt's outcome; only the attempt that holds the chunk may."""
        return bool(
            self._conn.execute(
                update(deliveries)
                .where(deliveries.c.id == delivery_id)
                .where(deliveries.c.status == DeliveryStatus.SENDING)
                .values(updated_at=self._clock(), **values)
            ).rowcount
        )
