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
    JSON,
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
    literal_column,
    null,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from nexus.ledger.enums import OPEN_QUEUE_STATUSES, QueueStatus
from nexus.ledger.repository.tables import (
    compactions,
    history,
    messages,
    queue_items,
    sessions,
    threads,
    tool_calls,
    turns,
)

# A commit writes every column but the one a rollback sets later (NULL until then).
TURN_COLUMNS = [column.name for column in turns.c if column.name != "abandoned_at"]
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

# What a head move writes; the session's first turn is its root, and that turn's start the
# session's, each kept once set (no statement of their own).
_MOVED_VALUES = {
    "thread_id": bindparam("head_new"),
    "updated_at": bindparam("head_now"),
    "root_turn_id": func.coalesce(sessions.c.root_turn_id, bindparam("head_new", type_=String)),
    "started_at": func.coalesce(
        sessions.c.started_at, bindparam("head_started", type_=sessions.c.started_at.type)
    ),
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
# on SQLite: every transaction begins IMMEDIATE (nexus.db.database), so the one writer already
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
#
# What several rows share is one parameter (`p_session`, `p_turn`, `p_parent`, `p_epoch`,
# `p_now`), constants are SQL literals, and the rest are named short by their row (`t_` the
# turn, `m_` the message arrays, `h_` history, `th_` thread, `i_` items): psycopg 3 caches a
# statement's conversion only up to 4,096 characters and 50 parameters, and re-parsed the
# 4.5 KB, 59-parameter form on every commit.
def _array(name: str, element: type[String] | type[Integer] | type[Text]) -> object:
    # One cast, in the SQL (psycopg2 sends an empty list as an untyped '{}'): a typed
    # parameter would add psycopg 3's own `::TYPE[]` to it.
    return cast(bindparam(name), ARRAY(element()))


_session = bindparam("p_session", type_=String)
_turn = bindparam("p_turn", type_=String)
_parent_id = bindparam("p_parent", type_=String)
_epoch = bindparam("p_epoch", type_=sessions.c.epoch.type)
_now = bindparam("p_now", type_=sessions.c.updated_at.type)
_SHARED = {"id": _turn, "session_id": _session, "parent_turn_id": _parent_id, "epoch": _epoch}
# The per-turn columns the statement takes as `t_<column>`; the rest are shared above.
TURN_PARAMS = [name for name in TURN_COLUMNS if name not in _SHARED]


def _turn_value(name: str) -> Any:
    # JSON comes as text and is cast here, so the statement takes the same parameters
    # through Core and straight from the driver (which does no JSON serialising of its own).
    if isinstance(turns.c[name].type, JSON):
        return cast(bindparam(f"t_{name}", type_=Text), turns.c[name].type)
    return bindparam(f"t_{name}", type_=turns.c[name].type)


_moved = (
    update(sessions)
    .where(sessions.c.id == _session)
    .where(sessions.c.epoch == _epoch)
    .where(sessions.c.thread_id.is_not_distinct_from(_parent_id))
    .values(
        thread_id=_turn,
        updated_at=_now,
        root_turn_id=func.coalesce(sessions.c.root_turn_id, _turn),
        started_at=func.coalesce(
            sessions.c.started_at, bindparam("t_started_at", type_=turns.c.started_at.type)
        ),
    )
    .returning(sessions.c.persona_id)
    .cte("moved")
)
_new_turn = (
    insert(turns)
    .from_select(
        TURN_COLUMNS,
        select(*(_SHARED.get(name, _turn_value(name)) for name in TURN_COLUMNS)).select_from(
            _moved
        ),
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
    .render_derived(name="m_rows")
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
            _now,
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
            _session,
            _new_turn.c.id,
            _parent_id,
            _epoch,
            bindparam("h_reason", type_=String),
            _now,
        ).select_from(_new_turn),
    )
    .cte("pointer_moved")
)
_consumed_rows = (
    func.unnest(_array("i_id", String), _array("i_disposition", String))
    .table_valued("id", "disposition")
    .render_derived(name="consumed_rows")
)
_open: list[ColumnElement[Any]] = [
    literal_column(f"'{status.value}'") for status in OPEN_QUEUE_STATUSES
]
_consumed = (
    update(queue_items)
    .where(queue_items.c.id == _consumed_rows.c.id)
    .where(queue_items.c.session_id == _session)
    .where(queue_items.c.status.in_(_open))
    .where(select(_new_turn.c.id).exists())
    .values(
        status=literal_column(f"'{QueueStatus.DONE.value}'"),
        disposition=_consumed_rows.c.disposition,
        consumed_by_turn_id=_turn,
        claim_expires_at=null(),
        updated_at=_now,
    )
    .returning(queue_items.c.id)
    .cte("consumed")
)
_parent_row = threads.alias("parent")
_new_thread = (
    insert(threads)
    .from_select(
        THREAD_COLUMNS,
        select(
            _turn,
            _parent_id,
            _session,
            _moved.c.persona_id,
            func.coalesce(_parent_row.c.depth, literal_column("0")) + literal_column("1"),
            func.coalesce(_parent_row.c.total_tokens, literal_column("0"))
            + bindparam("th_tokens", type_=threads.c.total_tokens.type),
            func.coalesce(
                bindparam("th_own_anchor", type_=String), _parent_row.c.anchor_turn_id, _turn
            ),
            _now,
        )
        # One row (none when the compare-and-set wrote none), with the parent's columns when
        # the turn has a parent with a thread row; no row when it names a parent without one.
        .select_from(_moved.outerjoin(_parent_row, _parent_row.c.turn_id == _parent_id))
        .where(or_(_parent_id.is_(None), _parent_row.c.turn_id.is_not(None))),
    )
    .returning(threads.c.turn_id)
    .cte("new_thread")
)
COMMIT_IN_ONE_STATEMENT = select(
    select(func.count()).select_from(_new_thread).scalar_subquery().label("threads"),
    select(func.count()).select_from(_consumed).scalar_subquery().label("consumed"),
).add_cte(_moved, _new_turn, _new_messages, _pointer_moved)
