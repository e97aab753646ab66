"""Reading the turn tree: context since the last compaction, full ancestry, single turns."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import (
    CTE,
    Column,
    ColumnElement,
    Connection,
    Select,
    String,
    Table,
    bindparam,
    or_,
    select,
    true,
)

from nexus.ledger.enums import TurnType
from nexus.ledger.models import Compaction, Message, Thread, ToolCall, Turn, table_of
from nexus.ledger.records import (
    CompactionRecord,
    ContextRead,
    MessageRecord,
    ThreadRecord,
    ToolCallRecord,
    TurnRecord,
    TurnView,
)
from nexus.ledger.repository._sql import columns_for, to_record

turns = table_of(Turn)
threads = table_of(Thread)
messages = table_of(Message)
tool_calls = table_of(ToolCall)
compactions = table_of(Compaction)


class ThreadRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def get_thread(self, turn_id: str) -> ThreadRecord | None:
        row = self._conn.execute(
            select(*columns_for(threads, ThreadRecord)).where(threads.c.turn_id == turn_id)
        ).one_or_none()
        return None if row is None else to_record(ThreadRecord, row)

    def get_turn(self, turn_id: str) -> TurnView | None:
        """One turn with its messages and tool calls, on the chain or not."""
        row = self._conn.execute(
            select(*columns_for(turns, TurnRecord)).where(turns.c.id == turn_id)
        ).one_or_none()
        if row is None:
            return None
        found_messages = self._conn.execute(
            select(*columns_for(messages, MessageRecord))
            .where(messages.c.turn_id == turn_id)
            .order_by(messages.c.sequence)
        )
        found_calls = self._conn.execute(
            select(*columns_for(tool_calls, ToolCallRecord))
            .where(tool_calls.c.turn_id == turn_id)
            .order_by(tool_calls.c.sequence)
        )
        return TurnView(
            turn=to_record(TurnRecord, row),
            messages=tuple(to_record(MessageRecord, r) for r in found_messages),
            tool_calls=tuple(to_record(ToolCallRecord, r) for r in found_calls),
        )

    def read_context(self, head_turn_id: str | None) -> ContextRead:
        """The latest compaction's summary plus the turns from its first kept turn to the head.

        A fixed number of index lookups per turn in the context, whatever the depth: the
        head's thread row, its anchor's compaction (by primary key), then the path from the
        head back to where the context starts with the turns, messages and tool calls on it.
        Older compaction turns inside the kept range are skipped: the newest summary already
        covers them.
        """
        head = self.get_thread(head_turn_id) if head_turn_id is not None else None
        if head is None:
            return ContextRead(head=None, compaction=None, turns=(), rows_read=0)
        compaction = self._compaction(head.anchor_turn_id)
        stop_at = head.anchor_turn_id
        if compaction is not None and compaction.first_kept_turn_id is not None:
            stop_at = compaction.first_kept_turn_id
        views = self._walk(head.turn_id, stop_at=stop_at, skip_compactions=True)
        rows = 1 + (compaction is not None) + len(views)
        rows += sum(len(view.messages) + len(view.tool_calls) for view in views)
        return ContextRead(head=head, compaction=compaction, turns=tuple(views), rows_read=rows)

    def read_ancestry(self, turn_id: str) -> list[TurnView]:
        """Every turn from the root to `turn_id`, compactions included: the whole thread."""
        return self._walk(turn_id, stop_at=None, skip_compactions=False)

    def _compaction(self, turn_id: str) -> CompactionRecord | None:
        row = self._conn.execute(
            select(*columns_for(compactions, CompactionRecord)).where(
                compactions.c.turn_id == turn_id
            )
        ).one_or_none()
        return None if row is None else to_record(CompactionRecord, row)

    def _walk(
        self, head_turn_id: str, *, stop_at: str | None, skip_compactions: bool
    ) -> list[TurnView]:
        """Turns from the root side of the walk to `head_turn_id`, with their rows, in order.

        The walk climbs parent links from the head and stops once `stop_at` (the context
        start; None for the root) is included.
        """
        statements = _WALKS[(self._conn.dialect.name == "postgresql", skip_compactions)]
        params = {"head": head_turn_id, "stop": stop_at}
        records = [to_record(TurnRecord, row) for row in self._conn.execute(statements[0], params)]
        if not records:
            return []
        by_turn_messages: dict[str, list[MessageRecord]] = defaultdict(list)
        for row in self._conn.execute(statements[1], params):
            by_turn_messages[row.turn_id].append(to_record(MessageRecord, row))
        by_turn_calls: dict[str, list[ToolCallRecord]] = defaultdict(list)
        for row in self._conn.execute(statements[2], params):
            by_turn_calls[row.turn_id].append(to_record(ToolCallRecord, row))
        return [
            TurnView(
                turn=turn,
                messages=tuple(by_turn_messages[turn.id]),
                tool_calls=tuple(by_turn_calls[turn.id]),
            )
            for turn in records
        ]


def _within_turn(columns: Any) -> list[Any]:
    """Rows that belong to one turn (messages, tool calls) come in their `sequence` order."""
    return [columns["sequence"]] if "sequence" in columns else []


def _path() -> CTE:
    """Thread rows from :head up its parent links, including :stop (NULL: up to the root)."""
    start = (
        select(threads.c.turn_id, threads.c.parent_turn_id, threads.c.depth)
        .where(threads.c.turn_id == bindparam("head"))
        .cte("path", recursive=True)
    )
    step = threads.alias("step")
    climb = (
        select(step.c.turn_id, step.c.parent_turn_id, step.c.depth)
        .join(start, step.c.turn_id == start.c.parent_turn_id)
        .where(or_(bindparam("stop", type_=String).is_(None), start.c.turn_id != bindparam("stop")))
    )
    return start.union_all(climb)


def _per_turn(
    postgres: bool,
    path: CTE,
    table: Table,
    turn_key: Column[Any],
    columns: list[Column[Any]],
    condition: ColumnElement[bool] | None = None,
) -> Select[Any]:
    """`table`'s rows for each turn on `path`, path order, as index lookups per turn.

    On Postgres a plain join lets the planner hash-join the whole table against the path,
    a scan that grows with the ledger; a fenced LATERAL subquery makes each lookup an index
    probe keyed by the path row. SQLite drives nested loops from the small side by itself
    (and has no LATERAL).
    """
    if postgres:
        probe = select(*columns).select_from(table).where(turn_key == path.c.turn_id)
        if condition is not None:
            probe = probe.where(condition)
        # OFFSET 0 keeps the planner from pulling the subquery up into a plain join, which
        # it would then hash against the whole table.
        lateral = probe.offset(0).correlate(path).lateral(f"{table.name}_of_turn")
        return (
            select(*(lateral.c[column.name] for column in columns))
            .select_from(path)
            .join(lateral, true())
            .order_by(path.c.depth, *_within_turn(lateral.c))
        )
    query = (
        select(*columns)
        .select_from(path)
        .join(table, turn_key == path.c.turn_id)
        .order_by(path.c.depth, *_within_turn(table.c))
    )
    return query if condition is None else query.where(condition)


def _walk_statements(postgres: bool, skip_compactions: bool) -> tuple[Select[Any], ...]:
    path = _path()
    only_normal = turns.c.turn_type == TurnType.NORMAL if skip_compactions else None
    return (
        _per_turn(postgres, path, turns, turns.c.id, columns_for(turns, TurnRecord), only_normal),
        _per_turn(
            postgres, path, messages, messages.c.turn_id, columns_for(messages, MessageRecord)
        ),
        _per_turn(
            postgres,
            path,
            tool_calls,
            tool_calls.c.turn_id,
            columns_for(tool_calls, ToolCallRecord),
        ),
    )


# Reads run on every turn, so their statements are built once: constructing the CTE and
# its aliases per call cost more than the queries. Keyed by (postgres?, skip compactions?).
_WALKS = {
    (postgres, skip): _walk_statements(postgres, skip)
    for postgres in (True, False)
    for skip in (True, False)
}
