"""The statements of a turn commit, built once at import and executed with parameters.

The commit path runs once per turn on every worker. Building SQLAlchemy expressions per call
cost more than the round trips they make, so everything here is compiled once and cached.
"""

from __future__ import annotations

from sqlalchemy import Integer, String, Text, bindparam, cast, func, insert, select, true, update
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

# The compare-and-set itself: it moves the head only if neither the head nor the epoch moved
# since the run began, and it takes the session's row lock (Postgres re-checks the condition
# against a concurrent winner's committed row), so every later write in this transaction is
# serialised behind it.
SWING_HEAD = (
    update(sessions)
    .where(sessions.c.id == bindparam("b_session_id"))
    .where(sessions.c.epoch == bindparam("b_epoch"))
    .where(sessions.c.thread_id.is_not_distinct_from(bindparam("b_expected_head", type_=String)))
    .values(thread_id=bindparam("b_new_head"), updated_at=bindparam("b_now"))
    .returning(sessions.c.persona_id)
)
# The step-wise commit (SQLite; a session's first turn on Postgres) checks first and moves
# the pointer last. The check locks the row on Postgres; on SQLite every transaction begins
# IMMEDIATE (nexus.db.engine), so the one writer already holds the database.
LOCK_HEAD = (
    select(sessions.c.persona_id)
    .where(sessions.c.id == bindparam("b_session_id"))
    .where(sessions.c.epoch == bindparam("b_epoch"))
    .where(sessions.c.thread_id.is_not_distinct_from(bindparam("b_expected_head", type_=String)))
    .with_for_update()
)
MOVE_HEAD = (
    update(sessions)
    .where(sessions.c.id == bindparam("b_session_id"))
    .values(thread_id=bindparam("b_new_head"), updated_at=bindparam("b_now"))
)
READ_HEAD = select(sessions.c.thread_id, sessions.c.epoch).where(
    sessions.c.id == bindparam("session_id")
)
INSERT_TURN = insert(turns)
INSERT_MESSAGES = insert(messages)
INSERT_TOOL_CALLS = insert(tool_calls)
INSERT_COMPACTION = insert(compactions)
INSERT_HISTORY = insert(history)
INSERT_ROOT_THREAD = insert(threads)

_parent = threads.alias("parent")
# A child's thread row is derived from its parent's inside the database: one round trip and
# no window for a stale read. A compaction turn anchors itself; others inherit the anchor.
INSERT_CHILD_THREAD = insert(threads).from_select(
    THREAD_COLUMNS,
    select(
        bindparam("turn_id", type_=String),
        _parent.c.turn_id,
        bindparam("session_id", type_=String),
        bindparam("persona_id", type_=String),
        _parent.c.depth + 1,
        _parent.c.total_tokens + bindparam("tokens", type_=threads.c.total_tokens.type),
        func.coalesce(bindparam("own_anchor", type_=String), _parent.c.anchor_turn_id),
        bindparam("now", type_=threads.c.created_at.type),
    ).where(_parent.c.turn_id == bindparam("parent_turn_id")),
)


CONSUME_ITEMS = (
    update(queue_items)
    .where(queue_items.c.id.in_(bindparam("q_ids", expanding=True)))
    .where(queue_items.c.session_id == bindparam("q_session_id"))
    .where(queue_items.c.status.in_(OPEN_QUEUE_STATUSES))
    .values(
        status=QueueStatus.DONE,
        disposition=bindparam("q_disposition"),
        consumed_by_turn_id=bindparam("q_turn_id"),
        claim_expires_at=None,
        updated_at=bindparam("q_now"),
    )
)


# On Postgres a child turn (the path nearly every turn takes) is ONE statement: the
# compare-and-set, the turn, its messages, its pointer-history row, its thread row and the
# queue items it consumed, as data-modifying CTEs (foreign keys are checked at the end of
# the statement). Every write selects FROM the compare-and-set's returned row, so a fenced
# attempt writes nothing at all. Messages and consumed items arrive as parallel arrays and
# are unnested, so their number does not change the statement (it is compiled once). The
# statement answers with what it wrote, which the repository checks. SQLite runs separate
# statements in-process, where round trips cost nothing.
def _array(name: str, element: type[String] | type[Integer] | type[Text]) -> object:
    return cast(bindparam(name, type_=ARRAY(element())), ARRAY(element()))


_swing = SWING_HEAD.cte("swing")
_new_turn = (
    insert(turns)
    .from_select(
        TURN_COLUMNS,
        select(
            *(bindparam(f"t_{name}", type_=turns.c[name].type) for name in TURN_COLUMNS)
        ).select_from(_swing),
    )
    .returning(turns.c.id)
    .cte("new_turn")
)
_message_rows = (
    func.unnest(
        _array("m_id", String),
        _array("m_sequence", Integer),
        _array("m_role", String),
        _array("m_source", String),
        _array("m_content", Text),
        _array("m_tool_call_id", String),
        _array("m_event_id", String),
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
            bindparam("m_now", type_=messages.c.created_at.type),
        ).select_from(_message_rows.join(_new_turn, true())),
    )
    .cte("new_messages")
)
_pointer_moved = (
    insert(history)
    .from_select(
        HISTORY_COLUMNS,
        select(
            bindparam("h_id", type_=String),
            bindparam("t_session_id", type_=String),
            _new_turn.c.id,
            bindparam("t_parent_turn_id", type_=String),
            bindparam("t_epoch", type_=turns.c.epoch.type),
            bindparam("h_reason", type_=String),
            bindparam("h_now", type_=history.c.changed_at.type),
        ).select_from(_new_turn),
    )
    .cte("pointer_moved")
)
_consumed_rows = (
    func.unnest(_array("q_id", String), _array("q_disposition", String))
    .table_valued("id", "disposition")
    .render_derived(name="consumed_rows")
)
_consumed = (
    update(queue_items)
    .where(queue_items.c.id == _consumed_rows.c.id)
    .where(queue_items.c.session_id == bindparam("t_session_id", type_=String))
    .where(queue_items.c.status.in_(OPEN_QUEUE_STATUSES))
    .where(select(_new_turn.c.id).exists())
    .values(
        status=QueueStatus.DONE,
        disposition=_consumed_rows.c.disposition,
        consumed_by_turn_id=bindparam("t_id", type_=String),
        claim_expires_at=None,
        updated_at=bindparam("h_now", type_=queue_items.c.updated_at.type),
    )
    .returning(queue_items.c.id)
    .cte("consumed")
)
_new_thread = (
    insert(threads)
    .from_select(
        THREAD_COLUMNS,
        select(
            bindparam("c_turn_id", type_=String),
            _parent.c.turn_id,
            bindparam("c_session_id", type_=String),
            _swing.c.persona_id,
            _parent.c.depth + 1,
            _parent.c.total_tokens + bindparam("c_tokens", type_=threads.c.total_tokens.type),
            func.coalesce(bindparam("c_own_anchor", type_=String), _parent.c.anchor_turn_id),
            bindparam("c_now", type_=threads.c.created_at.type),
        )
        .select_from(_parent.join(_swing, true()))
        .where(_parent.c.turn_id == bindparam("c_parent_turn_id", type_=String)),
    )
    .returning(threads.c.turn_id)
    .cte("new_thread")
)
COMMIT_CHILD = select(
    select(func.count()).select_from(_new_thread).scalar_subquery().label("threads"),
    select(func.count()).select_from(_consumed).scalar_subquery().label("consumed"),
).add_cte(_swing, _new_turn, _new_messages, _pointer_moved)
