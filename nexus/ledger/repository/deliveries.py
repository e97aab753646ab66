"""Outbound deliveries: chunks recorded before sending, sent in order, statuses forward only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    Update,
    and_,
    bindparam,
    exists,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import aliased

from nexus.ids import Clock, new_id
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryDraft, DeliveryRecord, EventDraft
from nexus.ledger.repository import driver
from nexus.ledger.repository._sql import columns_for, to_record
from nexus.ledger.repository.dialect_sql import insert_unless_present
from nexus.ledger.repository.events import SETTLED_EVENT_COLUMNS, EventRepository, event_row
from nexus.ledger.repository.tables import deliveries, events

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

# Statements are built once and executed with parameters: SQLAlchemy memoizes a reused
# statement's cache key, where one built per call is traversed again every time. Parameter
# names never equal a column of `deliveries` (an UPDATE would take them as more SET).
_RECORD_COLUMNS = columns_for(deliveries, DeliveryRecord)
# An earlier chunk of the same reply has not reached the platform yet.
_EARLIER_CHUNK_UNSENT = exists().where(
    and_(
        _earlier.c.turn_id == deliveries.c.turn_id,
        _earlier.c.chunk_index < deliveries.c.chunk_index,
        _earlier.c.status.not_in(LANDED),
    )
)
# Not waiting for a retry (or, while sending, for its claim to lapse).
_ATTEMPT_DUE = deliveries.c.next_attempt_at.is_(None) | (
    deliveries.c.next_attempt_at <= bindparam("now")
)


# The chunks (given as parameters) whose (turn, chunk) is not stored yet; answers their ids.
_ADD = insert_unless_present(deliveries, ["turn_id", "chunk_index"], returning=deliveries.c.id)
_ROW_COLUMNS = ["id", "status", "attempts", "created_at", "updated_at", *DeliveryDraft.model_fields]
# Postgres: a one-chunk reply's event (stored settled) and its chunk in one statement; the
# chunk's foreign key to the event is checked at the statement's end, the event written.
_REPLY_EVENT = (
    postgresql.insert(events)
    .values({c: bindparam(f"e_{c}", type_=events.c[c].type) for c in SETTLED_EVENT_COLUMNS})
    .on_conflict_do_nothing(index_elements=["id"])
    .cte("reply_event")
)
_REPLY_AND_CHUNK = (
    postgresql.insert(deliveries)
    .values({c: bindparam(f"d_{c}", type_=deliveries.c[c].type) for c in _ROW_COLUMNS})
    .on_conflict_do_nothing(index_elements=["turn_id", "chunk_index"])
    .returning(deliveries.c.id)
    .add_cte(_REPLY_EVENT)
)
_GET = select(*_RECORD_COLUMNS).where(deliveries.c.id == bindparam("delivery_id"))
_FOR_TURN = (
    select(*_RECORD_COLUMNS)
    .where(deliveries.c.turn_id == bindparam("reply_turn_id"))
    .order_by(deliveries.c.chunk_index)
)
_BEGIN_SEND = (
    update(deliveries)
    .where(deliveries.c.id == bindparam("delivery_id"))
    .where(deliveries.c.status == DeliveryStatus.PENDING)
    .where(_ATTEMPT_DUE)
    .where(~_EARLIER_CHUNK_UNSENT)
    .values(
        status=DeliveryStatus.SENDING,
        attempts=deliveries.c.attempts + 1,
        next_attempt_at=bindparam("lease_until"),  # while sending: when the claim lapses
        updated_at=bindparam("now"),
    )
    .returning(*_RECORD_COLUMNS)
)
# An attempt's outcome; only the attempt that holds the chunk may record it.
_FINISH = (
    update(deliveries)
    .where(deliveries.c.id == bindparam("delivery_id"))
    .where(deliveries.c.status == DeliveryStatus.SENDING)
    .values(
        status=bindparam("outcome"),
        error=bindparam("failure"),
        next_attempt_at=bindparam("retry_at_ms"),
        updated_at=bindparam("now"),
    )
)
_FINISH_SENT = _FINISH.values(provider_message_id=bindparam("sent_as"))
_FAIL_LATER = (
    update(deliveries)
    .where(deliveries.c.turn_id == bindparam("reply_turn_id"))
    .where(deliveries.c.chunk_index > bindparam("after_index"))
    .where(deliveries.c.status == DeliveryStatus.PENDING)
    .values(
        status=DeliveryStatus.FAILED,
        error=bindparam("failure"),
        next_attempt_at=None,
        updated_at=bindparam("now"),
    )
    .returning(deliveries.c.id)
)
_CHUNK = (
    select(deliveries.c.id)
    .where(deliveries.c.turn_id == bindparam("reply_turn_id"))
    .where(deliveries.c.chunk_index == bindparam("index"))
)
_LAPSED = (
    select(*_RECORD_COLUMNS)
    .where(deliveries.c.status == DeliveryStatus.SENDING)
    .where(deliveries.c.next_attempt_at < bindparam("now"))
    .order_by(deliveries.c.next_attempt_at)
    .limit(bindparam("limit", type_=Integer))
)
_RELEASE_LAPSED = (
    update(deliveries)
    .where(deliveries.c.id == bindparam("delivery_id"))
    .where(deliveries.c.status == DeliveryStatus.SENDING)
    .where(deliveries.c.next_attempt_at < bindparam("now"))
    .values(status=DeliveryStatus.PENDING, next_attempt_at=None)
)
_DUE = (
    select(deliveries.c.id)
    .where(deliveries.c.status == DeliveryStatus.PENDING)
    .where(_ATTEMPT_DUE)
    .where(~_EARLIER_CHUNK_UNSENT)
    .order_by(deliveries.c.created_at, deliveries.c.chunk_index)
    .limit(bindparam("limit", type_=Integer))
)
_ADVANCE = (
    update(deliveries)
    .where(deliveries.c.platform == bindparam("sender"))
    .where(deliveries.c.provider_message_id == bindparam("sent_as"))
    .where(deliveries.c.status.in_(bindparam("from_statuses", expanding=True)))
    .values(status=bindparam("outcome"), updated_at=bindparam("now"))
)


class DeliveryRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def add_reply(
        self, reply: EventDraft, drafts: Sequence[DeliveryDraft], *, disposition: str, detail: str
    ) -> list[str]:
        """Record a reply: its event, stored already settled, and its chunks (`add`). One
        statement for a one-chunk reply on Postgres; its event, then its chunks, elsewhere.

        Returns the ids of all the reply's chunks, in order."""
        now = self._clock()
        event = event_row(reply, now, disposition=disposition, detail=detail)
        if len(drafts) != 1 or self._conn.dialect.name != "postgresql":
            EventRepository(self._conn, self._clock).insert(
                reply, disposition=disposition, detail=detail
            )
            return self.add(drafts)
        [row] = self._rows(drafts, now)
        params = {f"e_{c}": event[c] for c in SETTLED_EVENT_COLUMNS}
        params.update({f"d_{c}": row[c] for c in _ROW_COLUMNS})
        if driver.rows(self._conn, _REPLY_AND_CHUNK, params):
            return [row["id"]]
        # Recorded before (a turn's hooks run again): the chunks already there count.
        return [d.id for d in self.for_turn(drafts[0].turn_id)]

    def add(self, drafts: Sequence[DeliveryDraft]) -> list[str]:
        """Record the chunks of a reply; recording one (turn, chunk) twice records it once.

        Returns the ids of all the reply's chunks, in order."""
        if not drafts:
            return []
        rows = self._rows(drafts, self._clock())
        ids = [row["id"] for row in rows]
        # One statement for one chunk (most replies), one executemany for several, answering
        # a row for each chunk it wrote: when it wrote them all, the ids given are the reply's.
        if len(rows) == 1:
            wrote = len(driver.rows(self._conn, _ADD(self._conn), rows[0]))
        else:
            wrote = len(self._conn.execute(_ADD(self._conn), rows).all())
        if wrote == len(rows):
            return ids
        # Recorded before (a turn's hooks run again): the chunks already there count.
        return [d.id for d in self.for_turn(drafts[0].turn_id)]

    def _rows(self, drafts: Sequence[DeliveryDraft], now: int) -> list[dict[str, Any]]:
        return [
            {
                "id": new_id(),
                "status": DeliveryStatus.PENDING,
                "attempts": 0,
                "created_at": now,
                "updated_at": now,
                **draft.model_dump(),
            }
            for draft in drafts
        ]

    def get(self, delivery_id: str) -> DeliveryRecord | None:
        row = self._conn.execute(_GET, {"delivery_id": delivery_id}).one_or_none()
        return None if row is None else to_record(DeliveryRecord, row)

    def for_turn(self, turn_id: str) -> list[DeliveryRecord]:
        rows = self._conn.execute(_FOR_TURN, {"reply_turn_id": turn_id})
        return [to_record(DeliveryRecord, row) for row in rows]

    def begin_send(self, delivery_id: str, *, lease_ms: int) -> DeliveryRecord | None:
        """Take a due, pending chunk whose earlier chunks have all landed; count the attempt.

        None when another worker has it, it is not due, or an earlier chunk is still on its
        way. Committed before the platform is called, so a crash mid-send is visible."""
        now = self._clock()
        row = self._conn.execute(
            _BEGIN_SEND, {"delivery_id": delivery_id, "now": now, "lease_until": now + lease_ms}
        ).one_or_none()
        return None if row is None else to_record(DeliveryRecord, row)

    def mark_sent(self, delivery_id: str, provider_message_id: str | None) -> bool:
        return self._finish(
            _FINISH_SENT,
            delivery_id,
            DeliveryStatus.SENT,
            error=None,
            retry_at=None,
            sent_as=provider_message_id,
        )

    def retry_at(self, delivery_id: str, at_ms: int, error: str) -> bool:
        return self._finish(
            _FINISH, delivery_id, DeliveryStatus.PENDING, error=error, retry_at=at_ms
        )

    def fail(self, delivery_id: str, error: str) -> list[str]:
        """The chunk failed for good, and with it every later chunk of the reply (a reply
        with a hole in it would mislead). Returns the ids failed."""
        record = self.get(delivery_id)
        if record is None or not self._finish(
            _FINISH, delivery_id, DeliveryStatus.FAILED, error=error, retry_at=None
        ):
            return []
        later = self._conn.execute(
            _FAIL_LATER,
            {
                "reply_turn_id": record.turn_id,
                "after_index": record.chunk_index,
                "failure": f"not sent: chunk {record.chunk_index} failed ({error})",
                "now": self._clock(),
            },
        ).scalars()
        return [delivery_id, *later]

    def next_chunk(self, turn_id: str, after_index: int) -> str | None:
        return self._conn.execute(
            _CHUNK, {"reply_turn_id": turn_id, "index": after_index + 1}
        ).scalar_one_or_none()

    def lapsed_sends(self, *, limit: int = 200) -> list[DeliveryRecord]:
        """Chunks whose sender stopped (crashed, killed) before recording the outcome."""
        rows = self._conn.execute(_LAPSED, {"now": self._clock(), "limit": limit})
        return [to_record(DeliveryRecord, row) for row in rows]

    def release_lapsed(self, delivery_id: str) -> bool:
        """Hand a lapsed send back to the queue, due now (an idempotent resend)."""
        return bool(
            self._conn.execute(
                _RELEASE_LAPSED, {"delivery_id": delivery_id, "now": self._clock()}
            ).rowcount
        )

    def due(self, *, limit: int = 500) -> list[str]:
        """Pending chunks that may be sent now (the relay rings these), oldest first."""
        return list(self._conn.execute(_DUE, {"now": self._clock(), "limit": limit}).scalars())

    def advance(self, platform: str, provider_message_id: str, status: DeliveryStatus) -> int:
        """Apply a platform's status callback; a stale or repeated one changes nothing."""
        allowed = _FORWARD_FROM.get(status)
        if not allowed:
            return 0
        parameters = {
            "sender": platform,
            "sent_as": provider_message_id,
            "from_statuses": list(allowed),
            "outcome": status,
            "now": self._clock(),
        }
        return int(self._conn.execute(_ADVANCE, parameters).rowcount)

    def _finish(
        self,
        statement: Update,
        delivery_id: str,
        outcome: DeliveryStatus,
        *,
        error: str | None,
        retry_at: int | None,
        **more: object,
    ) -> bool:
        """Record an attempt's outcome; only the attempt that holds the chunk may. `more`
        are the statement's own parameters (a sent chunk's platform message id)."""
        parameters = {
            "delivery_id": delivery_id,
            "outcome": outcome,
            "failure": error,
            "retry_at_ms": retry_at,
            "now": self._clock(),
            **more,
        }
        return bool(self._conn.execute(statement, parameters).rowcount)
