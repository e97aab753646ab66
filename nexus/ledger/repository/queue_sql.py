"""The queue's per-message SQL, built once (parameter names never equal a written column)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, String, any_, bindparam, cast, func, or_, select, true, update
from sqlalchemy.dialects.postgresql import ARRAY

from nexus.ledger.enums import EventStatus, QueueStatus
from nexus.ledger.records import EventRecord, QueueItemRecord
from nexus.ledger.repository._sql import columns_for, upsert_insert
from nexus.ledger.repository.dialect_sql import PerDialect
from nexus.ledger.repository.sessions import BUMP_EPOCH
from nexus.ledger.repository.tables import events, queue_items, sessions

# Every statement here runs for each message or each run: a statement built per call is
# traversed for its cache key on every execution, a prebuilt one only once.


_ITEM_COLUMNS = columns_for(queue_items, QueueItemRecord)
_QUEUE_ORDER = (queue_items.c.priority.desc(), queue_items.c.enqueued_at, queue_items.c.id)
_OPEN = [QueueStatus.QUEUED, QueueStatus.CLAIMED]

# A new item; a second routing of one event to one session inserts nothing.
_ENQUEUE_VALUES: dict[str, Any] = {
    "id": bindparam("item_id"),
    "session_id": bindparam("item_session"),
    "event_id": bindparam("item_event"),
    "mode": bindparam("item_mode"),
    "priority": bindparam("item_priority"),
    "source": bindparam("item_source"),
    "payload": bindparam("item_payload"),
    "status": QueueStatus.QUEUED,
    "attempts": 0,
    "available_at": bindparam("item_available_at"),
    "enqueued_at": bindparam("item_now"),
    "updated_at": bindparam("item_now"),
}


def _enqueue(connection: Connection, returning: Sequence[Any] = (queue_items.c.id,)) -> Any:
    return (
        upsert_insert(connection, queue_items)
        .values(**_ENQUEUE_VALUES)
        .on_conflict_do_nothing(index_elements=["session_id", "event_id"])
        .returning(*returning)
    )


ENQUEUE = PerDialect(_enqueue)

# The item's session's queue by what a run would look at, by the enqueue's names: how many
# wait (queued), how many are claimed, how many dropped ones still owe their summary.
_status = queue_items.c.status
_CENSUS = (
    select(
        func.count().filter(_status == QueueStatus.QUEUED).label("queued"),
        func.count().filter(_status == QueueStatus.CLAIMED).label("claimed"),
        func.count()
        .filter(
            (_status == QueueStatus.DROPPED)
            & queue_items.c.disposition_detail.endswith(bindparam("marker"))
        )
        .label("owed"),
    )
    .where(queue_items.c.session_id == bindparam("item_session"))
    .subquery("census")
)


def _enqueue_counting(connection: Connection) -> Any:
    """Postgres: the enqueue as a CTE, returning the row it wrote, and the session's queue
    counted beside it, in one statement. The counts read the table as the statement
    started, without the row its CTE inserts: that row is added to `queued` (none when the
    item was there already)."""
    new_item = _enqueue(connection, _ITEM_COLUMNS).cte("new_item")
    inserted = select(func.count()).select_from(new_item).scalar_subquery()
    return select(
        *(new_item.c[column.name].label(f"q_{column.name}") for column in _ITEM_COLUMNS),
        (_CENSUS.c.queued + inserted).label("queued"),
        _CENSUS.c.claimed,
        _CENSUS.c.owed,
    ).select_from(_CENSUS.outerjoin(new_item, true()))


ENQUEUE_COUNTING = PerDialect(_enqueue_counting)

# What the router's batch decided for each of its events (`events.mark_many_processed`'s
# rows, as parallel arrays), written in the batch's last enqueue: only a first disposition
# sticks, as there.
_settled_rows = (
    func.unnest(
        cast(bindparam("settle_ids"), ARRAY(String())),
        cast(bindparam("settle_outcomes"), ARRAY(String())),
        cast(bindparam("settle_details"), ARRAY(String())),
    )
    .table_valued("id", "outcome", "detail")
    .render_derived(name="settled_rows")
)
_SETTLED = (
    update(events)
    .where(events.c.id == _settled_rows.c.id)
    .where(events.c.status == EventStatus.RECEIVED)
    .values(
        status=EventStatus.PROCESSED,
        disposition=_settled_rows.c.outcome,
        disposition_detail=_settled_rows.c.detail,
        processed_at=bindparam("item_now"),
    )
    .returning(events.c.id)
    .cte("settled")
)


def _enqueue_counting_settling(connection: Connection) -> Any:
    """`_enqueue_counting`, with the batch's events' dispositions written by the same
    statement (a data-modifying CTE runs whether or not the statement reads it)."""
    return _enqueue_counting(connection).add_cte(_SETTLED)


ENQUEUE_COUNTING_SETTLING = PerDialect(_enqueue_counting_settling)
ENQUEUED_ID = select(queue_items.c.id).where(
    queue_items.c.session_id == bindparam("item_session"),
    queue_items.c.event_id == bindparam("item_event"),
)

# Claim exactly these queued items under the given epoch (SQLite's second step).
CLAIM_IDS = (
    update(queue_items)
    .where(queue_items.c.id.in_(bindparam("claim_items", expanding=True)))
    .where(queue_items.c.status == QueueStatus.QUEUED)
    .values(
        status=QueueStatus.CLAIMED,
        claimed_epoch=bindparam("claim_epoch"),
        claim_expires_at=bindparam("claim_expires"),
        attempts=queue_items.c.attempts + 1,
        updated_at=bindparam("claim_now"),
    )
    .returning(*_ITEM_COLUMNS)
)


def claiming(bumped: Any) -> Any:
    """Claim the `run_items` still queued under the epoch the session's bump (`bumped`, a
    CTE returning at least the session's id and epoch) just took: an UPDATE returning them."""
    return (
        update(queue_items)
        .where(
            queue_items.c.id
            == any_(cast(bindparam("run_items", type_=ARRAY(String)), ARRAY(String)))
        )
        .where(queue_items.c.status == QueueStatus.QUEUED)
        # Only the bumped session's items: none when the session is not there.
        .where(queue_items.c.session_id == select(bumped.c.id).scalar_subquery())
        .values(
            status=QueueStatus.CLAIMED,
            claimed_epoch=select(bumped.c.epoch).scalar_subquery(),
            claim_expires_at=bindparam("run_expires_at"),
            attempts=queue_items.c.attempts + 1,
            updated_at=bindparam("run_now"),
        )
    )


CLAIM_FOR_RUN = claiming(BUMP_EPOCH.returning(sessions.c.id).cte("bumped")).returning(
    *_ITEM_COLUMNS
)
SESSION_EPOCH = select(sessions.c.epoch).where(sessions.c.id == bindparam("bump_session"))

_FOR_SESSION = select(*_ITEM_COLUMNS).where(queue_items.c.session_id == bindparam("session_id"))
FOR_SESSION = _FOR_SESSION.order_by(*_QUEUE_ORDER)
FOR_SESSION_IN = _FOR_SESSION.where(
    queue_items.c.status.in_(bindparam("statuses", expanding=True))
).order_by(*_QUEUE_ORDER)
# One status (the run's look for what waits, after its release): no expanding list, so the
# statement can go straight to the driver.
FOR_SESSION_WITH = _FOR_SESSION.where(queue_items.c.status == bindparam("status")).order_by(
    *_QUEUE_ORDER
)

# Which of these items a run at this epoch still holds (claimed under it).
HELD = (
    select(*_ITEM_COLUMNS)
    .where(queue_items.c.id.in_(bindparam("held_items", expanding=True)))
    .where(queue_items.c.status == QueueStatus.CLAIMED)
    .where(queue_items.c.claimed_epoch == bindparam("held_epoch"))
)

# How many wait (queued, not claimed): the cap's check, which reads the items only past it.
COUNT_QUEUED = (
    select(func.count())
    .select_from(queue_items)
    .where(queue_items.c.session_id == bindparam("session_id"))
    .where(queue_items.c.status == QueueStatus.QUEUED)
)

STILL_OWING = (
    select(queue_items.c.session_id)
    .where(queue_items.c.event_id == bindparam("owed_event"))
    .where(queue_items.c.status.in_(_OPEN))
    .limit(1)
)

ITEM_FIELDS = list(QueueItemRecord.model_fields)
EVENT_FIELDS = list(EventRecord.model_fields)
OPEN_FOR_RUN = (
    select(
        *(queue_items.c[name].label(f"q_{name}") for name in ITEM_FIELDS),
        *(events.c[name].label(f"e_{name}") for name in EVENT_FIELDS),
    )
    .select_from(queue_items.outerjoin(events, events.c.id == queue_items.c.event_id))
    .where(queue_items.c.session_id == bindparam("session_id"))
    .where(
        # Equalities, not IN: a constant IN list compiles to an expanding parameter, which
        # the driver path (repository/driver.py) does not take.
        or_(*(queue_items.c.status == status for status in _OPEN))
        | (
            (queue_items.c.status == QueueStatus.DROPPED)
            & queue_items.c.disposition_detail.endswith(bindparam("marker"))
        )
    )
    .order_by(*_QUEUE_ORDER)
)
