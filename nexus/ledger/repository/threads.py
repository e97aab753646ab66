"""Reading the turn tree: context since the last compaction, full ancestry, single turns."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    CTE,
    Column,
    Connection,
    Integer,
    Select,
    String,
    Table,
    any_,
    bindparam,
    cast,
    or_,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY

from nexus.ledger.enums import TurnType
from nexus.ledger.records import (
    CompactionRecord,
    ContextRead,
    MessageRecord,
    ThreadRecord,
    ToolCallRecord,
    TurnRecord,
    TurnView,
)
from nexus.ledger.repository._sql import columns_for, one_record, to_record
from nexus.ledger.repository.tables import compactions, messages, threads, tool_calls, turns


@dataclass(frozen=True)
class HeadRow:
    """A head's thread row with what its context starts from: the anchor's depth, and the
    anchor's compaction when the anchor is one (the root anchors a chain never compacted)."""

    thread: ThreadRecord
    compaction: CompactionRecord | None
    anchor_depth: int


def head_context_row(row: Mapping[Any, Any], prefix: str = "") -> HeadRow:
    """The HeadRow in a row of `_HEAD_AND_ANCHOR`'s columns (thread columns named with
    `prefix`, the compaction's with `c_`, and `anchor_depth`)."""
    thread = ThreadRecord.model_validate({name: row[prefix + name] for name in _THREAD_FIELDS})
    compaction = None
    if row["c_turn_id"] is not None:
        compaction = CompactionRecord.model_validate(
            {name: row[f"c_{name}"] for name in _COMPACTION_FIELDS}
        )
    return HeadRow(thread=thread, compaction=compaction, anchor_depth=int(row["anchor_depth"]))


def extends(known: ContextRead, head: HeadRow) -> bool:
    """Whether `known` may be extended to `head`: the same anchor (so the same compaction,
    and no newer one in between) and no deeper than the head. Whether it is on the head's
    path is for the read to find out."""
    return (
        known.head is not None
        and known.head.anchor_turn_id == head.thread.anchor_turn_id
        and known.head.depth <= head.thread.depth
    )


class ThreadRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def get_thread(self, turn_id: str) -> ThreadRecord | None:
        return one_record(self._conn, threads, ThreadRecord, threads.c.turn_id == turn_id)

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

    def read_context(
        self, head_turn_id: str | None, *, known: ContextRead | None = None
    ) -> ContextRead:
        """The latest compaction's summary plus the turns from its first kept turn to the head.

        A fixed number of index lookups per turn in the context, whatever the depth: the
        head's thread row joined with its anchor (depth, and compaction if it is one), then
        the path from the head back to where the context starts, and the messages and tool
        calls of the turns on it.
        Older compaction turns inside the kept range are skipped: the newest summary already
        covers them. The turns come with their messages only: a tool call and its result are
        messages too (what the model is shown); the `tool_calls` rows, kept for audit and
        the API (`get_turn`, `read_ancestry`), are not read here.

        `known`, a context this process read before, is extended instead of read again when
        the head descends from it under the same compaction: turns never change once
        committed, so only the turns after it are read.
        """
        found = (
            self._conn.execute(_HEAD_AND_ANCHOR, {"head": head_turn_id}).one_or_none()
            if head_turn_id is not None
            else None
        )
        if found is None:
            return ContextRead(head=None, compaction=None, turns=(), rows_read=0)
        return self.context_at(head_context_row(found._mapping), known=known)

    def context_at(self, head: HeadRow, *, known: ContextRead | None = None) -> ContextRead:
        """The context whose head row (with its anchor) was read already; see read_context."""
        if known is not None and extends(known, head):
            assert known.head is not None  # extends() says so
            if known.head.turn_id == head.thread.turn_id:
                # The stored head row, whether this process read it or extended to it itself.
                same = known.head == head.thread
                return known if same else known.model_copy(update={"head": head.thread})
            # Climb from the head no higher than the known head, which must be on the path
            # (a sibling branch at the same depth is not): read with compactions, so that a
            # known head that is itself the compaction is found, and keep the normal turns.
            path = self._extension(head.thread.turn_id, floor=known.head.depth)
            if path and path[0].turn.id == known.head.turn_id:
                added = [v for v in path[1:] if v.turn.turn_type == TurnType.NORMAL]
                rows = 1 + len(added) + sum(len(v.messages) for v in added)
                return ContextRead(
                    head=head.thread,
                    compaction=head.compaction,
                    turns=(*known.turns, *added),
                    rows_read=rows,
                    anchor_depth=head.anchor_depth,
                )
        stop_at = head.thread.anchor_turn_id
        if head.compaction is not None and head.compaction.first_kept_turn_id is not None:
            stop_at = head.compaction.first_kept_turn_id
        views = self._with_rows(
            self._turns_on_path(
                head.thread.turn_id, stop_at=stop_at, skip_compactions=True, floor=None
            ),
            tool_calls=False,
        )
        rows = 1 + (head.compaction is not None) + len(views)
        rows += sum(len(view.messages) + len(view.tool_calls) for view in views)
        return ContextRead(
            head=head.thread,
            compaction=head.compaction,
            turns=tuple(views),
            rows_read=rows,
            anchor_depth=head.anchor_depth,
        )

    def _extension(self, head_turn_id: str, *, floor: int) -> list[TurnView]:
        """The turns from depth `floor` down to the head, compactions included, each with
        its messages (no tool calls: the context does not read them), in one round trip."""
        views: list[TurnView] = []
        found: list[MessageRecord] = []
        turn: TurnRecord | None = None
        statement = _EXTENSIONS[self._conn.dialect.name == "postgresql"]
        params = {"head": head_turn_id, "stop": None, "floor": floor}
        for row in self._conn.execute(statement, params):
            values = row._mapping
            if turn is None or turn.id != values["id"]:
                if turn is not None:
                    views.append(TurnView(turn=turn, messages=tuple(found), tool_calls=()))
                turn, found = _turn_of_row(values), []
            if values["m_id"] is not None:
                found.append(_message_of_row(values))
        if turn is not None:
            views.append(TurnView(turn=turn, messages=tuple(found), tool_calls=()))
        return views

    def read_ancestry(self, turn_id: str) -> list[TurnView]:
        """Every turn from the root to `turn_id`, compactions included: the whole thread."""
        return self._walk(turn_id, stop_at=None, skip_compactions=False)

    def _rows_of_turns(self, statement: Select[Any], ids: list[str]) -> list[Any]:
        """Rows of these turns, in (turn, sequence) order; SQLite takes the ids in slices
        (it caps a statement's parameters), Postgres as one array."""
        if self._conn.dialect.name == "postgresql":
            return list(self._conn.execute(statement, {"ids": ids}))
        return [
            row
            for start in range(0, len(ids), _SQLITE_IDS_PER_QUERY)
            for row in self._conn.execute(
                statement, {"ids": ids[start : start + _SQLITE_IDS_PER_QUERY]}
            )
        ]

    def _walk(
        self,
        head_turn_id: str,
        *,
        stop_at: str | None,
        skip_compactions: bool,
        floor: int | None = None,
    ) -> list[TurnView]:
        """Turns from the root side of the walk to `head_turn_id`, with their rows, in order.

        The walk climbs parent links from the head and stops once `stop_at` (the context
        start; None for the root) or the turn at depth `floor` is included.
        """
        return self._with_rows(
            self._turns_on_path(
                head_turn_id, stop_at=stop_at, skip_compactions=skip_compactions, floor=floor
            )
        )

    def _turns_on_path(
        self, head_turn_id: str, *, stop_at: str | None, skip_compactions: bool, floor: int | None
    ) -> list[TurnRecord]:
        """The walk itself: the turns on the path, root side first, in one statement."""
        postgres = self._conn.dialect.name == "postgresql"
        walk = _WALKS[(postgres, skip_compactions)]
        params = {"head": head_turn_id, "stop": stop_at, "floor": floor}
        return [to_record(TurnRecord, row) for row in self._conn.execute(walk, params)]

    def _with_rows(self, records: list[TurnRecord], *, tool_calls: bool = True) -> list[TurnView]:
        """The turns with their messages (and tool calls): index lookups by the turns' ids."""
        if not records:
            return []
        postgres = self._conn.dialect.name == "postgresql"
        ids = [turn.id for turn in records]
        by_turn_messages: dict[str, list[MessageRecord]] = defaultdict(list)
        for row in self._rows_of_turns(_MESSAGES_OF[postgres], ids):
            by_turn_messages[row.turn_id].append(to_record(MessageRecord, row))
        by_turn_calls: dict[str, list[ToolCallRecord]] = defaultdict(list)
        for row in self._rows_of_turns(_TOOL_CALLS_OF[postgres], ids) if tool_calls else ():
            by_turn_calls[row.turn_id].append(to_record(ToolCallRecord, row))
        return [
            TurnView(
                turn=turn,
                messages=tuple(by_turn_messages[turn.id]),
                tool_calls=tuple(by_turn_calls[turn.id]),
            )
            for turn in records
        ]


def _path() -> CTE:
    """Thread rows from :head up its parent links, including :stop (NULL: up to the root)
    and no higher than depth :floor (NULL: no floor)."""
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
        .where(or_(bindparam("floor", type_=Integer).is_(None), start.c.depth > bindparam("floor")))
    )
    return start.union_all(climb)


def _walk_statement(postgres: bool, skip_compactions: bool) -> Select[Any]:
    """The turns on the path from :head back to :stop, root side first, as index lookups.

    On Postgres a plain join lets the planner hash-join the whole table against the path,
    a scan that grows with the ledger; a fenced LATERAL subquery makes each lookup an index
    probe keyed by the path row. SQLite drives nested loops from the small side by itself
    (and has no LATERAL).
    """
    path = _path()
    columns = columns_for(turns, TurnRecord)
    probe = select(*columns).where(turns.c.id == path.c.turn_id)
    if skip_compactions:
        probe = probe.where(turns.c.turn_type == TurnType.NORMAL)
    if not postgres:
        return probe.select_from(path).order_by(path.c.depth)
    # OFFSET 0 keeps the planner from pulling the subquery up into a plain join, which it
    # would then hash against the whole table.
    lateral = probe.offset(0).correlate(path).lateral("turn_on_path")
    return (
        select(*(lateral.c[column.name] for column in columns))
        .select_from(path)
        .join(lateral, true())
        .order_by(path.c.depth)
    )


def _extension_statement(postgres: bool) -> Select[Any]:
    """The walk from :head up to depth :floor (compactions included), each turn's row
    beside each of its messages (NULLs for a turn with none), in path then sequence order."""
    path = _path()
    turn_columns = columns_for(turns, TurnRecord)
    probe = select(*turn_columns).where(turns.c.id == path.c.turn_id)
    walked: Any
    if postgres:  # as in _walk_statement: one index probe per path row, never a hash join
        walked = probe.offset(0).correlate(path).lateral("turn_on_path")
        source = path.join(walked, true())
    else:
        walked, source = turns, path.join(turns, turns.c.id == path.c.turn_id)
    return (
        select(
            *(walked.c[column.name] for column in turn_columns),
            *(messages.c[name].label(f"m_{name}") for name in MessageRecord.model_fields),
        )
        .select_from(source.outerjoin(messages, messages.c.turn_id == walked.c.id))
        .order_by(path.c.depth, messages.c.sequence)
    )


def _turn_of_row(values: Mapping[Any, Any]) -> TurnRecord:
    return TurnRecord.model_validate({name: values[name] for name in TurnRecord.model_fields})


def _message_of_row(values: Mapping[Any, Any]) -> MessageRecord:
    return MessageRecord.model_validate(
        {name: values[f"m_{name}"] for name in MessageRecord.model_fields}
    )


def _of_turns(postgres: bool, table: Table, columns: list[Column[Any]]) -> Select[Any]:
    """`table`'s rows whose turn is one of :ids, by the (turn_id, sequence) unique index.
    Postgres takes the ids as one array parameter, so the statement text (and its prepared
    plan) does not change with their number."""
    if postgres:
        ids = cast(bindparam("ids", type_=ARRAY(String)), ARRAY(String))
        condition = table.c.turn_id == any_(ids)
    else:
        condition = table.c.turn_id.in_(bindparam("ids", expanding=True))
    return select(*columns).where(condition).order_by(table.c.turn_id, table.c.sequence)


# The head's thread row, its anchor's depth and the anchor's compaction (when the anchor is
# one; the root anchors a chain never compacted) in one round trip, by primary keys.
_anchor = threads.alias("anchor")
_THREAD_FIELDS = list(ThreadRecord.model_fields)
_COMPACTION_FIELDS = list(CompactionRecord.model_fields)
_HEAD_AND_ANCHOR = (
    select(
        *columns_for(threads, ThreadRecord),
        _anchor.c.depth.label("anchor_depth"),
        *(compactions.c[name].label(f"c_{name}") for name in _COMPACTION_FIELDS),
    )
    .select_from(
        threads.join(_anchor, _anchor.c.turn_id == threads.c.anchor_turn_id).outerjoin(
            compactions, compactions.c.turn_id == threads.c.anchor_turn_id
        )
    )
    .where(threads.c.turn_id == bindparam("head"))
)

# Reads run on every turn, so their statements are built once: constructing the CTE and
# its aliases per call cost more than the queries. Keyed by (postgres?, skip compactions?).
_WALKS = {
    (postgres, skip): _walk_statement(postgres, skip)
    for postgres in (True, False)
    for skip in (True, False)
}
_MESSAGES_OF = {
    postgres: _of_turns(postgres, messages, columns_for(messages, MessageRecord))
    for postgres in (True, False)
}
_TOOL_CALLS_OF = {
    postgres: _of_turns(postgres, tool_calls, columns_for(tool_calls, ToolCallRecord))
    for postgres in (True, False)
}
_EXTENSIONS = {postgres: _extension_statement(postgres) for postgres in (True, False)}
_SQLITE_IDS_PER_QUERY = 500
