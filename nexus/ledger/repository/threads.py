"""Reading the turn tree: context since the last compaction, full ancestry, single turns."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import Connection, select

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

_BATCH = 1000


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
        return self._views([to_record(TurnRecord, row)])[0]

    def read_context(self, head_turn_id: str | None) -> ContextRead:
        """The latest compaction's summary plus the turns from its first kept turn to the head.

        Four queries whatever the depth: the head's thread row (with the anchor's
        compaction), the path from the head back to where the context starts, and the
        messages and tool calls of those turns. Older compaction turns inside the kept range
        are skipped: the newest summary already covers them.
        """
        if head_turn_id is None:
            return ContextRead(head=None, compaction=None, turns=(), rows_read=0)
        row = self._conn.execute(
            select(
                *columns_for(threads, ThreadRecord),
                compactions.c.summary,
                compactions.c.summarized_through_turn_id,
                compactions.c.first_kept_turn_id,
                compactions.c.turns_summarized,
                compactions.c.trigger,
                compactions.c.instructions,
            )
            .select_from(threads)
            .outerjoin(compactions, compactions.c.turn_id == threads.c.anchor_turn_id)
            .where(threads.c.turn_id == head_turn_id)
        ).one_or_none()
        if row is None:
            return ContextRead(head=None, compaction=None, turns=(), rows_read=0)
        mapping = dict(row._mapping)
        head = ThreadRecord.model_validate({k: mapping[k] for k in ThreadRecord.model_fields})
        compaction: CompactionRecord | None = None
        stop_at = head.anchor_turn_id
        if mapping["summary"] is not None:
            compaction = CompactionRecord(
                turn_id=head.anchor_turn_id,
                summary=mapping["summary"],
                summarized_through_turn_id=mapping["summarized_through_turn_id"],
                first_kept_turn_id=mapping["first_kept_turn_id"],
                turns_summarized=mapping["turns_summarized"],
                trigger=mapping["trigger"],
                instructions=mapping["instructions"],
            )
            stop_at = compaction.first_kept_turn_id or head.anchor_turn_id
        path = self._path(head_turn_id, stop_at=stop_at, skip_compactions=True)
        views = self._views(path)
        rows = 1 + len(path) + sum(len(v.messages) + len(v.tool_calls) for v in views)
        return ContextRead(head=head, compaction=compaction, turns=tuple(views), rows_read=rows)

    def read_ancestry(self, turn_id: str) -> list[TurnView]:
        """Every turn from the root to `turn_id`, compactions included: the whole thread."""
        return self._views(self._path(turn_id, stop_at=None, skip_compactions=False))

    def _path(
        self, head_turn_id: str, *, stop_at: str | None, skip_compactions: bool
    ) -> list[TurnRecord]:
        """Turns from `head_turn_id` up to and including `stop_at` (or the root), root first."""
        anchor = (
            select(threads.c.turn_id, threads.c.parent_turn_id, threads.c.depth)
            .where(threads.c.turn_id == head_turn_id)
            .cte("path", recursive=True)
        )
        step = threads.alias("step")
        walk = select(step.c.turn_id, step.c.parent_turn_id, step.c.depth).join(
            anchor, step.c.turn_id == anchor.c.parent_turn_id
        )
        if stop_at is not None:
            # Stop climbing once the context start has been reached.
            walk = walk.where(anchor.c.turn_id != stop_at)
        path = anchor.union_all(walk)
        query = (
            select(*columns_for(turns, TurnRecord))
            .join(path, turns.c.id == path.c.turn_id)
            .order_by(path.c.depth)
        )
        if skip_compactions:
            query = query.where(turns.c.turn_type == TurnType.NORMAL)
        return [to_record(TurnRecord, row) for row in self._conn.execute(query)]

    def _views(self, turn_records: Sequence[TurnRecord]) -> list[TurnView]:
        if not turn_records:
            return []
        ids = [turn.id for turn in turn_records]
        by_turn_messages: dict[str, list[MessageRecord]] = defaultdict(list)
        by_turn_calls: dict[str, list[ToolCallRecord]] = defaultdict(list)
        # Batches keep a long ancestry under SQLite's limit on bound parameters.
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            for row in self._conn.execute(
                select(*columns_for(messages, MessageRecord))
                .where(messages.c.turn_id.in_(batch))
                .order_by(messages.c.turn_id, messages.c.sequence)
            ):
                by_turn_messages[row.turn_id].append(to_record(MessageRecord, row))
            for row in self._conn.execute(
                select(*columns_for(tool_calls, ToolCallRecord))
                .where(tool_calls.c.turn_id.in_(batch))
                .order_by(tool_calls.c.turn_id, tool_calls.c.sequence)
            ):
                by_turn_calls[row.turn_id].append(to_record(ToolCallRecord, row))
        return [
            TurnView(
                turn=turn,
                messages=tuple(by_turn_messages[turn.id]),
                tool_calls=tuple(by_turn_calls[turn.id]),
            )
            for turn in turn_records
        ]
