"""The events ledger: idempotent inserts under deterministic ids, and dispositions."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Select,
    String,
    bindparam,
    case,
    exists,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql

from nexus.ids import Clock
from nexus.ledger.enums import EventStatus, HookObligation
from nexus.ledger.hook_lineage import CARRIERS, lineage_of, merged, owes_hooks
from nexus.ledger.records import EntityRecord, EventDraft, EventRecord
from nexus.ledger.repository import driver
from nexus.ledger.repository._sql import columns_for, to_record, upsert_insert
from nexus.ledger.repository.dialect_sql import PerDialect
from nexus.ledger.repository.event_search import search_events
from nexus.ledger.repository.tables import contacts, entities, events, hooks, queue_items, turns

# Statements are built once and executed with parameters: SQLAlchemy memoizes a reused
# statement's cache key, where one built per call is traversed again every time. Parameter
# names never equal a column of the table an UPDATE writes (it would take them as more SET).
_RECORD_COLUMNS = columns_for(events, EventRecord)
_EVENT_FIELDS = list(EventRecord.model_fields)


# The event's hook obligation, written by the statement that stores it: `due` for an event
# that owes the hooks an evaluation (`hooks_due`, from `owes_hooks`) while some hook is
# enabled; none otherwise, so a deployment without hooks never has an obligation to settle.
_HOOKS_STATUS = case(
    (exists().where(hooks.c.enabled.is_(True)), bindparam("hooks_due", type_=String))
)
# The row (given as parameters) unless its id is stored already; answers the id.
_INSERT = PerDialect(
    lambda connection: (
        upsert_insert(connection, events)
        .values(hooks_status=_HOOKS_STATUS)
        .on_conflict_do_nothing(index_elements=["id"])
        .returning(events.c.id)
    )
)
_GET = select(*_RECORD_COLUMNS).where(events.c.id == bindparam("event_id"))
_ANSWERED_BY = (
    select(*_RECORD_COLUMNS, events.c.payload.label("raw_payload"))
    .join(turns, turns.c.source_event_id == events.c.id)
    .where(turns.c.id == bindparam("turn_id"))
)
_PAYLOAD_OF = select(events.c.payload).where(events.c.id == bindparam("event_id"))


def _latest_routed(adapter: ColumnElement[bool]) -> Select[Any]:
    return (
        select(*_RECORD_COLUMNS)
        .join(queue_items, queue_items.c.event_id == events.c.id)
        .where(queue_items.c.session_id == bindparam("session_id"))
        .where(events.c.direction == "inbound")
        .where(adapter)
        .order_by(events.c.received_at.desc(), events.c.id.desc())
        .limit(1)
    )


_LATEST_INBOUND = _latest_routed(events.c.adapter.in_(bindparam("adapters", expanding=True)))
_LATEST_ROUTED = _latest_routed(events.c.adapter.not_in(bindparam("internal", expanding=True)))
# Only the first disposition sticks: an event another path already settled is left alone.
MARK_PROCESSED = (
    update(events)
    .where(events.c.id == bindparam("event_id"), events.c.status == EventStatus.RECEIVED)
    .values(
        status=EventStatus.PROCESSED,
        disposition=bindparam("outcome"),
        disposition_detail=bindparam("outcome_detail"),
        processed_at=bindparam("now"),
    )
)
# Waiting events, each beside its sender's entity (the contact the webhook recorded, and
# its entity): the router's identity read joined in, one round trip for the batch. Only the
# events are locked (Postgres locks no row of an outer join's nullable side).
_ENTITY_FIELDS = list(EntityRecord.model_fields)
_CLAIM_WAITING = (
    select(
        *_RECORD_COLUMNS,
        *(entities.c[name].label(f"se_{name}") for name in _ENTITY_FIELDS),
    )
    .select_from(
        events.outerjoin(contacts, contacts.c.id == events.c.contact_id).outerjoin(
            entities, entities.c.id == contacts.c.entity_id
        )
    )
    .where(events.c.status == EventStatus.RECEIVED)
    .order_by(events.c.received_at, events.c.id)
    .limit(bindparam("limit", type_=Integer))
    .with_for_update(skip_locked=True, of=events)
)
_UNPROCESSED = (
    select(events.c.id)
    .where(events.c.status == EventStatus.RECEIVED)
    .where(events.c.received_at < bindparam("received_before"))
    .order_by(events.c.received_at, events.c.id)
    .limit(bindparam("limit", type_=Integer))
)
_RECENT = (
    select(*_RECORD_COLUMNS)
    .order_by(events.c.received_at.desc())
    .limit(bindparam("limit", type_=Integer))
)
# Oldest first, from the partial index of due obligations. An event still waiting for the
# router is left to it (it runs the hooks after routing, and the relay rings it): a hook
# run's write to that row would have the router's claim skip it.
_HOOKS_OWED = (
    select(events.c.id)
    .where(events.c.hooks_status == HookObligation.DUE)
    .where(events.c.status == EventStatus.PROCESSED)
    .where(events.c.received_at <= bindparam("received_by"))
    .order_by(events.c.received_at, events.c.id)
    .limit(bindparam("limit", type_=Integer))
)
# Forward only: an obligation is discharged once, and never owed again.
_HOOKS_DONE = (
    update(events)
    .where(events.c.id == bindparam("event_id"), events.c.hooks_status == HookObligation.DUE)
    .values(hooks_status=HookObligation.DONE)
)


# The columns of an event stored already settled (`event_row` with a disposition).
SETTLED_EVENT_COLUMNS = [
    *EventDraft.model_fields,
    "received_at",
    "status",
    "disposition",
    "disposition_detail",
    "processed_at",
]


def event_row(
    draft: EventDraft, now: int, *, disposition: str | None = None, detail: str | None = None
) -> dict[str, Any]:
    """The row of an event received `now`: waiting for the router, or, with a
    `disposition`, stored already settled. `hooks_due` is the obligation an insert writes
    when some hook is enabled (`_HOOKS_STATUS`)."""
    row = draft.model_dump()
    row["attachments"] = list(draft.attachments)
    row["received_at"] = now
    row["hooks_due"] = HookObligation.DUE if owes_hooks(draft.adapter, draft.direction) else None
    if disposition is not None:
        row.update(
            status=EventStatus.PROCESSED,
            disposition=disposition,
            disposition_detail=detail,
            processed_at=now,
        )
    else:
        row["status"] = EventStatus.RECEIVED
    return row


# Postgres: a known sender's contact touched and their event stored in one statement (the
# webhook's whole write). `contact` is None when the sender has no contact yet (nothing was
# stored: the caller creates the contact, then stores the event); `event` is None when the
# event was stored before (a platform's redelivery).
_RECEIVED_COLUMNS = [*EventDraft.model_fields, "received_at", "status"]
_touched = (
    update(contacts)
    .where(
        contacts.c.platform == bindparam("contact_platform"),
        contacts.c.sender_id == bindparam("contact_sender"),
    )
    .values(last_seen_at=bindparam("seen_at"), display_name=bindparam("seen_name"))
    .returning(contacts.c.id)
    .cte("touched")
)
_stored = (
    postgresql.insert(events)
    .from_select(
        [*_RECEIVED_COLUMNS, "hooks_status"],
        select(
            *(
                _touched.c.id
                if name == "contact_id"
                else bindparam(f"e_{name}", type_=events.c[name].type)
                for name in _RECEIVED_COLUMNS
            ),
            _HOOKS_STATUS,
        ),
    )
    .on_conflict_do_nothing(index_elements=["id"])
    .returning(events.c.id)
    .cte("stored")
)
_TOUCH_AND_INSERT = select(
    select(_touched.c.id).scalar_subquery().label("contact"),
    select(_stored.c.id).scalar_subquery().label("event"),
)


class EventRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def insert(
        self, draft: EventDraft, *, disposition: str | None = None, detail: str | None = None
    ) -> bool:
        """Store the event; False when that id was stored before (a duplicate delivery).

        With a `disposition`, the event is stored already settled (one statement, not an
        insert and then an update): an event no router needs to see, such as a reply."""
        row = event_row(draft, self._clock(), disposition=disposition, detail=detail)
        return bool(driver.rows(self._conn, _INSERT(self._conn), row))

    def insert_from_known_sender(
        self, draft: EventDraft, *, platform: str, sender_id: str, display_name: str | None
    ) -> tuple[str, bool] | None:
        """Postgres: touch the sender's contact (`identity.touch_contact`) and store the event
        with it (`insert`), one statement for someone seen before. Returns the contact id
        and whether the event was new; None, having written nothing, when the sender has no
        contact yet, or on another database (the caller then does both steps itself)."""
        if self._conn.dialect.name != "postgresql":
            return None
        now = self._clock()
        row = event_row(draft, now)
        params = {f"e_{name}": row[name] for name in _RECEIVED_COLUMNS if name != "contact_id"}
        params.update(
            contact_platform=platform,
            contact_sender=sender_id,
            seen_at=now,
            seen_name=display_name,
            hooks_due=row["hooks_due"],
        )
        found = driver.one_or_none(self._conn, _TOUCH_AND_INSERT, params)
        if found is None or found["contact"] is None:
            return None
        return str(found["contact"]), found["event"] is not None

    def get(self, event_id: str) -> EventRecord | None:
        row = self._conn.execute(_GET, {"event_id": event_id}).one_or_none()
        return None if row is None else to_record(EventRecord, row)

    def answered_by(self, turn_id: str) -> tuple[EventRecord, dict[str, Any]] | None:
        """The event a turn answered (its first query's), with the platform's raw update, in
        one read; None when the turn answered none (asked through the API, say)."""
        row = self._conn.execute(_ANSWERED_BY, {"turn_id": turn_id}).one_or_none()
        if row is None:
            return None
        fields = dict(row._mapping)
        raw = fields.pop("raw_payload") or {}
        return EventRecord.model_validate(fields), dict(raw)

    def payload_of(self, event_id: str) -> dict[str, Any]:
        """The platform's raw update (what an outbound sender may need to answer it)."""
        payload = self._conn.execute(_PAYLOAD_OF, {"event_id": event_id}).scalar_one_or_none()
        return dict(payload or {})

    def latest_inbound_for_session(
        self, session_id: str, adapters: Collection[str]
    ) -> EventRecord | None:
        """The newest platform message routed to the session: where it last heard from a
        person, and so where an answer to an internal trigger (a worker's result, a hook)
        goes."""
        return self._latest(_LATEST_INBOUND, session_id=session_id, adapters=list(adapters))

    def latest_routed_for_session(
        self, session_id: str, internal: Collection[str]
    ) -> EventRecord | None:
        """The newest message from outside Nexus (any adapter but the `internal` ones) that
        was routed to the session: the one its access policy last decided on."""
        return self._latest(_LATEST_ROUTED, session_id=session_id, internal=list(internal))

    def _latest(self, statement: Select[Any], **parameters: object) -> EventRecord | None:
        row = self._conn.execute(statement, parameters).one_or_none()
        return None if row is None else to_record(EventRecord, row)

    def mark_processed(self, event_id: str, disposition: str, detail: str | None = None) -> bool:
        """Record what became of the event; only the first disposition sticks."""
        changed = driver.execute(
            self._conn,
            MARK_PROCESSED,
            {
                "event_id": event_id,
                "outcome": disposition,
                "outcome_detail": detail,
                "now": self._clock(),
            },
        )
        return bool(changed)

    def mark_many_processed(self, outcomes: Sequence[tuple[str, str, str | None]]) -> None:
        """`mark_processed` for many events (id, disposition, detail) in one executemany."""
        if not outcomes:
            return
        driver.execute(
            self._conn,
            MARK_PROCESSED,
            [
                {"event_id": e, "outcome": d, "outcome_detail": t, "now": self._clock()}
                for e, d, t in outcomes
            ],
        )

    def claim_waiting(self, *, limit: int) -> list[tuple[EventRecord, EntityRecord | None]]:
        """Events waiting for the router, oldest first, that no other router has in hand:
        row-locked until this transaction ends (Postgres skips locked rows; SQLite has one
        writer at a time anyway). Each comes with the entity of the contact it was stored
        with, as it is (merges not followed); None when it has none (no sender, or not a
        person's message)."""
        found: list[tuple[EventRecord, EntityRecord | None]] = []
        for row in driver.rows(self._conn, _CLAIM_WAITING, {"limit": limit}):
            event = EventRecord.model_validate({name: row[name] for name in _EVENT_FIELDS})
            entity = None
            if row["se_id"] is not None:
                entity = EntityRecord.model_validate(
                    {name: row[f"se_{name}"] for name in _ENTITY_FIELDS}
                )
            found.append((event, entity))
        return found

    def unprocessed(self, *, received_before: int, limit: int = 500) -> list[str]:
        """Events still waiting for the router, oldest first (the relay re-rings these)."""
        return list(
            self._conn.execute(
                _UNPROCESSED, {"received_before": received_before, "limit": limit}
            ).scalars()
        )

    def hooks_owed(self, *, received_by: int, limit: int = 100) -> list[str]:
        """Events stored by `received_by` whose hooks are still due and that no router
        waits to route, oldest first (the relay re-rings these)."""
        return list(
            self._conn.execute(_HOOKS_OWED, {"received_by": received_by, "limit": limit}).scalars()
        )

    def hooks_done(self, event_id: str) -> bool:
        """Discharge the event's hook obligation; False when it was not due (discharged
        already, or never owed)."""
        return bool(driver.execute(self._conn, _HOOKS_DONE, {"event_id": event_id}))

    def hook_lineage(
        self, *, turn_id: str | None = None, item_ids: Sequence[str] = ()
    ) -> list[str]:
        """The hook lineage (`nexus.ledger.hook_lineage`) of what a turn answered: of the
        events of the queue items it consumed (`turn_id`, in its own commit's transaction)
        or of the given items. Only events hooks fired and agents posted carry one."""
        conditions = []
        if turn_id is not None:
            conditions.append(queue_items.c.consumed_by_turn_id == turn_id)
        if item_ids:
            conditions.append(queue_items.c.id.in_(list(item_ids)))
        if not conditions:
            return []
        rows = self._conn.execute(
            select(events.c.adapter, events.c.payload)
            .join(queue_items, queue_items.c.event_id == events.c.id)
            .where(or_(*conditions))
            .where(events.c.adapter.in_(CARRIERS))
        )
        return merged(lineage_of(row.adapter, row.payload) for row in rows)

    def search(self, query: str, *, limit: int = 10) -> list[EventRecord]:
        """Inbound events with a word that starts with one of the query's words, newest
        first, through the full-text index (nexus/ledger/repository/event_search.py)."""
        return search_events(self._conn, query, limit=limit)

    def recent(self, *, limit: int = 20) -> list[EventRecord]:
        rows = self._conn.execute(_RECENT, {"limit": limit})
        return [to_record(EventRecord, row) for row in rows]
