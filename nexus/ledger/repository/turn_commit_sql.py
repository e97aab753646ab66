"""The SQL of the turn commit, built once at import: one statement, or its steps on SQLite.

The commit runs once per turn on every worker; building SQLAlchemy expressions per call cost
more than the round trips they make, so everything here is compiled once and cached.
Parameters are named for the row they fill: `head_*` (the session's pointer), `turn_*`,
`thread_*`, `history_*`, `message_*` and `item_*` (the consumed queue items). Names never
equal a column of the table a statement updates: SQLAlchemy would take such a parameter as
one more SET.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    Integer,
    Select,
    String,
    Text,
    bindparam,
    cast,
    func,
    insert,
    literal,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from nexus.ledger.enums import OPEN_QUEUE_STATUSES, QueueStatus
from nexus.ledger.models import (
    Compaction,
    Message,
    QueueItem,
    Session,
    SessionHistory,
    Thread,
    ToolCall,
    Turn,
    table_of,
)

turns = table_of(Turn)
threads = table_of(Thread)
messages = table_of(Message)
tool_calls = table_of(ToolCall)
compactions = table_of(Compaction)
sessions = table_of(Session)
history = table_of(SessionHistory)
queue_items = table_of(QueueItem)

TURN_COLUMNS = [column.name for column in turns.c]
MESSAGE_COLUMNS = [c.name for c in messages.c if c.name not in ("turn_id", "created_at")]
HISTORY_COLUMNS = [
    "id",
    "session_id",
    "thread_id",
    "previous_thread_id",
    "epoch",
    "reason",
    "changed_at",
]
THREAD_COLUMNS = [
    "turn_id",
    "parent_turn_id",
    "session_id",
    "persona_id",
    "depth",
    "total_tokens",
    "anchor_turn_id",
    "created_at",
]

# What a head move writes; the session's first turn is its root, kept once set.
_MOVED_VALUES = {
    "thread_id": bindparam("head_new"),
    "updated_at": bindparam("head_now"),
    "root_turn_id": func.coalesce(sessions.c.root_turn_id, bindparam("head_new", type_=String)),
}

# The compare-and-set: the head moves only if neither it nor the epoch moved since the run
# began. It takes the session's row lock (Postgres re-checks the condition against a
# concurrent winner's committed row), so every later write of the commit queues behind it.
MOVE_HEAD_IF_UNCHANGED = (
    update(sessions)
    .where(sessions.c.id == bindparam("head_session_id"))
    .where(sessions.c.epoch == bindparam("head_epoch"))
    .where(sessions.c.thread_id.is_not_distinct_from(bindparam("head_expected", type_=String)))
    .values(**_MOVED_VALUES)
    .returning(sessions.c.persona_id)
)

# -- step by step (SQLite) --------------------------------------------------------------------
# The same compare-and-set as a check first and the move last. The check locks nothing more
# on SQLite: every transaction begins IMMEDIATE (nexus.db.engine), so the one writer already
# holds the database. The pointer moves last because SQLite settles the deferred foreign key
# (sessions.thread_id) by scanning `sessions` on every insert into `turns` while it is
# pending: pointing at a turn not yet written made each commit cost O(sessions).
CHECK_HEAD = (
    select(sessions.c.persona_id)
    .where(sessions.c.id == bindparam("head_session_id"))
    .where(sessions.c.epoch == bindparam("head_epoch"))
    .where(sessions.c.thread_id.is_not_distinct_from(bindparam("head_expected", type_=String)))
    .with_for_update()
)
MOVE_HEAD = (
    update(sessions).where(sessions.c.id == bindparam("head_session_id")).values(**_MOVED_VALUES)
)
READ_HEAD = select(sessions.c.thread_id, sessions.c.epoch).where(
    sessions.c.id == bindparam("session_id")
)
INSERT_TURN = insert(turns)
INSERT_MESSAGES = insert(messages)
INSERT_TOOL_CALLS = insert(tool_calls)
INSERT_COMPACTION = insert(compactions)
INSERT_HISTORY = insert(history)

_parent = threads.alias("parent")


def _thread_row(persona_id: ColumnElement[Any], after: CTE | None = None) -> Select[Any]:
    """The new thread row, derived from the parent's inside the database (no stale read): a
    first turn is depth 1 and its own anchor; a compaction anchors itself; others inherit
    the parent's anchor. No row when the turn names a parent that has no thread row."""
    return (
        select(
            bindparam("thread_turn_id", type_=String),
            bindparam("thread_parent_turn_id", type_=String),
            bindparam("thread_session_id", type_=String),
            persona_id,
            func.coalesce(_parent.c.depth, 0) + 1,
            func.coalesce(_parent.c.total_tokens, 0)
            + bindparam("thread_tokens", type_=threads.c.total_tokens.type),
            func.coalesce(
                bindparam("thread_own_anchor", type_=String),
                _parent.c.anchor_turn_id,
                bindparam("thread_turn_id", type_=String),
            ),
            bindparam("thread_now", type_=threads.c.created_at.type),
        )
        .select_from(
            # One row (or none, when `after` returned none), with the parent's columns when
            # the turn has a parent with a thread row.
            (
                after if after is not None else select(literal(1).label("one")).subquery("one")
            ).outerjoin(
                _parent, _parent.c.turn_id == bindparam("thread_parent_turn_id", type_=String)
            )
        )
        .where(
            or_(
                bindparam("thread_parent_turn_id", type_=String).is_(None),
                _parent.c.turn_id.is_not(None),
            )
        )
    )


INSERT_THREAD = insert(threads).from_select(
    THREAD_COLUMNS, _thread_row(bindparam("thread_persona_id", type_=String))
)
CONSUME_ITEMS = (
    update(queue_items)
    .where(queue_items.c.id.in_(bindparam("item_ids", expanding=True)))
    .where(queue_items.c.session_id == bindparam("item_session_id"))
    .where(queue_items.c.status.in_(OPEN_QUEUE_STATUSES))
    .values(
        status=QueueStatus.DONE,
        disposition=bindparam("item_disposition"),
        consumed_by_turn_id=bindparam("item_turn_id"),
        claim_expires_at=None,
        updated_at=bindparam("item_now"),
    )
)


# -- one statement (Postgres) -----------------------------------------------------------------
# The compare-and-set, the turn, its messages, its pointer-history row, its thread row and
# the queue items it consumed, as data-modifying CTEs (foreign keys are checked at the end of
# the statement). Every write selects FROM the compare-and-set's returned row, so a fenced
# attempt writes nothing at all. Messages and consumed items arrive as parallel arrays and
# are unnested, so their number does not change the statement (it is compiled once, and
# psycopg 3 prepares it on the server; psycopg2 binds the arrays as ARRAY[...] literals and
# Postgres plans the statement each time). The statement answers with what it wrote, which the
# repository checks. Tool calls and a compaction row, when a turn has any, follow it.
def _array(name: str, element: type[String] | type[Integer] | type[Text]) -> object:
    return cast(bindparam(name, type_=ARRAY(element())), ARRAY(element()))


_moved = MOVE_HEAD_IF_UNCHANGED.cte("moved")
_new_turn = (
    insert(turns)
    .from_select(
        TURN_COLUMNS,
        select(
            *(bindparam(f"turn_{name}", type_=turns.c[name].type) for name in TURN_COLUMNS)
        ).select_from(_moved),
    )
    .returning(turns.c.id)
    .cte("new_turn")
)
_message_rows = (
    func.unnest(
        _array("message_id", String),
        _array("message_sequence", Integer),
        _array("message_role", String),
        _array("message_source", String),
        _array("message_content", Text),
        _array("message_tool_call_id", String),
        _array("message_event_id", String),
    )
    .table_valued(*MESSAGE_COLUMNS)
    .render_derived(name="message_rows")
)
_new_messages = (
    insert(messages)
    .from_select(
        [*MESSAGE_COLUMNS, "turn_id", "created_at"],
        select(
            *(
                cast(_message_rows.c[name], JSONB) if name == "content" else _message_rows.c[name]
                for name in MESSAGE_COLUMNS
            ),
            _new_turn.c.id,
            bindparam("message_now", type_=messages.c.created_at.type),
        ).select_from(_message_rows.join(_new_turn, true())),
    )
    .cte("new_messages")
)
_pointer_moved = (
    insert(history)
    .from_select(
        HISTORY_COLUMNS,
        select(
            bindparam("history_id", type_=String),
            bindparam("history_session_id", type_=String),
            _new_turn.c.id,
            bindparam("history_previous_thread_id", type_=String),
            bindparam("history_epoch", type_=history.c.epoch.type),
            bindparam("history_reason", type_=String),
            bindparam("history_changed_at", type_=history.c.changed_at.type),
        ).select_from(_new_turn),
    )
    .cte("pointer_moved")
)
_consumed_rows = (
    func.unnest(_array("item_id", String), _array("item_disposition", String))
    .table_valued("id", "disposition")
    .render_derived(name="consumed_rows")
)
_consumed = (
    update(queue_items)
    .where(queue_items.c.id == _consumed_rows.c.id)
    .where(queue_items.c.session_id == bindparam("item_session_id", type_=String))
    .where(queue_items.c.status.in_(OPEN_QUEUE_STATUSES))
    .where(select(_new_turn.c.id).exists())
    .values(
        status=QueueStatus.DONE,
        disposition=_consumed_rows.c.disposition,
        consumed_by_turn_id=bindparam("item_turn_id", type_=String),
        claim_expires_at=None,
        updated_at=bindparam("item_now", type_=queue_items.c.updated_at.type),
    )
    .returning(queue_items.c.id)
    .cte("consumed")
)
_new_thread = (
    insert(threads)
    .from_select(THREAD_COLUMNS, _thread_row(_moved.c.persona_id, after=_moved))
    .returning(threads.c.turn_id)
    .cte("new_thread")
)
COMMIT_IN_ONE_STATEMENT = select(
    select(func.count()).select_from(_new_thread).scalar_subquery().label("threads"),
    select(func.count()).select_from(_consumed).scalar_subquery().label("consumed"),
).add_cte(_moved, _new_turn, _new_messages, _pointer_moved)
