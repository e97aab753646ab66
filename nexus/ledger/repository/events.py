"""The events ledger: idempotent inserts under deterministic ids, and dispositions."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, func, or_, select, update

from nexus.ids import Clock
from nexus.ledger.enums import EventStatus
from nexus.ledger.models import Event, QueueItem, table_of
from nexus.ledger.records import EventDraft, EventRecord
from nexus.ledger.repository._sql import columns_for, to_record, upsert_insert

events = table_of(Event)
queue_items = table_of(QueueItem)


class EventRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def insert(self, draft: EventDraft) -> bool:
        """Store the event; False when that id was stored before (a duplicate delivery)."""
        values = draft.model_dump()
        values["attachments"] = list(draft.attachments)
        statement = upsert_insert(self._conn, events).values(
            received_at=self._clock(), status=EventStatus.RECEIVED, **values
        )
        inserted = self._conn.execute(
            statement.on_conflict_do_nothing(index_elements=["id"]).returning(events.c.id)
        ).scalar_one_or_none()
        return inserted is not None

    def get(self, event_id: str) -> EventRecord | None:
        row = self._conn.execute(
            select(*columns_for(events, EventRecord)).where(events.c.id == event_id)
        ).one_or_none()
        return None if row is None else to_record(EventRecord, row)

    def payload_of(self, event_id: str) -> dict[str, Any]:
        """The platform's raw update (what an outbound sender may need to answer it)."""
        payload = self._conn.execute(
            select(events.c.payload).where(events.c.id == event_id)
        ).scalar_one_or_none()
        return dict(payload or {})

    def latest_inbound_for_session(
        self, session_id: str, adapters: Collection[str]
    ) -> EventRecord | None:
        """The newest platform message routed to the session: where it last heard from a
        person, and so where an answer to an internal trigger (a worker's result, a hook)
        goes."""
        row = self._conn.execute(
            select(*columns_for(events, EventRecord))
            .join(queue_items, queue_items.c.event_id == events.c.id)
            .where(queue_items.c.session_id == session_id)
            .where(events.c.direction == "inbound")
            .where(events.c.adapter.in_(list(adapters)))
            .order_by(events.c.received_at.desc(), events.c.id.desc())
            .limit(1)
        ).one_or_none()
        return None if row is None else to_record(EventRecord, row)

    def mark_processed(self, event_id: str, disposition: str, detail: str | None = None) -> bool:
        """Record what became of the event; only the first disposition sticks."""
        result = self._conn.execute(
            update(events)
            .where(events.c.id == event_id, events.c.status == EventStatus.RECEIVED)
            .values(
                status=EventStatus.PROCESSED,
                disposition=disposition,
                disposition_detail=detail,
                processed_at=self._clock(),
            )
        )
        return bool(result.rowcount)

    def unprocessed(self, *, received_before: int, limit: int = 500) -> list[str]:
        """Events still waiting for the router, oldest first (the relay re-rings these)."""
        return list(
            self._conn.execute(
                select(events.c.id)
                .where(events.c.status == EventStatus.RECEIVED)
                .where(events.c.received_at < received_before)
                .order_by(events.c.received_at, events.c.id)
                .limit(limit)
            ).scalars()
        )

    def search(self, query: str, *, limit: int = 10) -> list[EventRecord]:
        """Inbound events whose text contains any of the query's words, newest first."""
        words = [word for word in query.lower().split() if len(word) > 1][:8]
        if not words:
            return []
        condition = or_(*(func.lower(events.c.text).contains(word) for word in words))
        rows = self._conn.execute(
            select(*columns_for(events, EventRecord))
            .where(events.c.direction == "inbound")
            .where(condition)
            .order_by(events.c.received_at.desc())
            .limit(limit)
        )
        return [to_record(EventRecord, row) for row in rows]

    def recent(self, *, limit: int = 20) -> list[EventRecord]:
        rows = self._conn.execute(
            select(*columns_for(events, EventRecord))
            .order_by(events.c.received_at.desc())
            .limit(limit)
        )
        return [to_record(EventRecord, row) for row in rows]
