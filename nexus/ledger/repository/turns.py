"""Committing turns: one transaction, compare-and-set on the session's head and epoch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Executable

from nexus.ids import Clock, new_id
from nexus.ledger.enums import CHAIN_STATUSES, OFF_CHAIN_STATUSES, TurnType
from nexus.ledger.records import CommitOutcome, MessageRecord, TurnDraft, TurnRecord, TurnView
from nexus.ledger.repository import driver
from nexus.ledger.repository.errors import LedgerConflict, NotFound
from nexus.ledger.repository.turn_commit_sql import (
    CHECK_HEAD,
    COMMIT_IN_ONE_STATEMENT,
    CONSUME_ITEMS,
    INSERT_COMPACTION,
    INSERT_HISTORY,
    INSERT_MESSAGES,
    INSERT_THREAD,
    INSERT_TOOL_CALLS,
    INSERT_TURN,
    MOVE_HEAD,
    READ_HEAD,
    TURN_PARAMS,
)

_MESSAGE_ARRAYS = ("id", "sequence", "role", "source", "tool_call_id", "event_id")


@dataclass(frozen=True)
class _CommitRows:
    """Everything one turn commit writes, built once; each database runs it its own way."""

    head: dict[str, Any]
    turn: dict[str, Any]
    thread: dict[str, Any]
    history: dict[str, Any]
    messages: list[dict[str, Any]]
    items: dict[str, Any]
    now: int


class TurnRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock
        self._postgres = connection.dialect.name == "postgresql"

    def commit(self, draft: TurnDraft, *, epoch: int) -> CommitOutcome:
        """Append `draft` to its session's chain if nobody moved the head or the epoch.

        The first statement is the compare-and-set on (head, epoch); when it matches no row
        the attempt is fenced and nothing has been written (the caller may still commit its
        unit of work). Otherwise the rest lands in this same transaction: turn, messages,
        tool calls, compaction, thread row, pointer history and the queue items the turn
        consumed (invariant 4, docs/architecture.md).
        """
        if draft.status not in CHAIN_STATUSES:
            raise ValueError(
                f"only {[s.value for s in CHAIN_STATUSES]} turns join a chain; record a "
                f"{draft.status.value} attempt with record_attempt()"
            )
        if (draft.compaction is not None) != (draft.turn_type == TurnType.COMPACTION):
            raise ValueError("a compaction turn needs compaction metadata, and only it may have it")

        rows = self._rows(draft, epoch, self._clock())
        if self._postgres:
            return self._commit_in_one_statement(draft, epoch, rows)
        return self._commit_step_by_step(draft, epoch, rows)

    def _commit_in_one_statement(
        self, draft: TurnDraft, epoch: int, rows: _CommitRows
    ) -> CommitOutcome:
        """Postgres: the commit is one round trip (turn_commit_sql.COMMIT_IN_ONE_STATEMENT),
        then tool calls and a compaction row when the turn has any."""
        turn, thread, history = rows.turn, rows.thread, rows.history
        params: dict[str, Any] = {
            "p_session": draft.session_id,
            "p_turn": draft.id,
            "p_parent": draft.parent_turn_id,
            "p_epoch": epoch,
            "p_now": rows.now,
            **{f"t_{name}": turn[name] for name in TURN_PARAMS},
            "th_tokens": thread["tokens"],
            "th_own_anchor": thread["own_anchor"],
            "h_id": history["id"],
            "h_reason": history["reason"],
            **{
                f"m_{name}": [message[name] for message in rows.messages]
                for name in _MESSAGE_ARRAYS
            },
            "m_content": [json.dumps(message["content"]) for message in rows.messages],
            # As text, cast by the statement (None is JSON null, as Core binds it).
            "t_model_settings": json.dumps(draft.model_settings),
            "i_id": rows.items["id"],
            "i_disposition": rows.items["disposition"],
        }
        (wrote,) = driver.rows(self._conn, COMMIT_IN_ONE_STATEMENT, params)
        if not wrote["threads"]:
            return self._fenced_or_orphaned(draft, epoch)
        if wrote["consumed"] != len(draft.consumed):
            raise LedgerConflict(_not_all_open(draft))
        self._insert_tool_calls_and_compaction(draft, rows.now)
        return _committed(draft, rows)

    def _commit_step_by_step(
        self, draft: TurnDraft, epoch: int, rows: _CommitRows
    ) -> CommitOutcome:
        """SQLite (no data-modifying CTEs; round trips cost nothing in-process): the same
        rows, statement by statement: check the head, write the rows, move the head last."""
        persona_id = driver.scalar(self._conn, CHECK_HEAD, rows.head)
        if persona_id is None:
            return self._fenced(draft, epoch)
        self._run(INSERT_TURN, rows.turn)
        thread = {f"thread_{name}": value for name, value in rows.thread.items()}
        if self._run(INSERT_THREAD, {**thread, "thread_persona_id": persona_id}) != 1:
            raise LedgerConflict(f"parent turn {draft.parent_turn_id!r} has no thread row")
        self._run(INSERT_HISTORY, rows.history)
        self._insert_messages(rows)
        self._insert_tool_calls_and_compaction(draft, rows.now)
        self._run(MOVE_HEAD, rows.head)
        self._consume_items(draft, rows.items)
        return _committed(draft, rows)

    def _run(self, statement: Executable, params: dict[str, Any] | list[dict[str, Any]]) -> int:
        """A hot statement, straight to the driver; the rows it changed."""
        return driver.execute(self._conn, statement, params)

    def _fenced_or_orphaned(self, draft: TurnDraft, epoch: int) -> CommitOutcome:
        """No thread row was written: a fence, unless the CAS did pass and only the parent's
        thread row was missing, which is corruption to refuse (the caller rolls back)."""
        current = self._conn.execute(READ_HEAD, {"session_id": draft.session_id}).one_or_none()
        if current is not None and current.thread_id == draft.id and current.epoch == epoch:
            raise LedgerConflict(f"parent turn {draft.parent_turn_id!r} has no thread row")
        return self._fenced(draft, epoch)

    def _fenced(self, draft: TurnDraft, epoch: int) -> CommitOutcome:
        current = self._conn.execute(READ_HEAD, {"session_id": draft.session_id}).one_or_none()
        if current is None:
            raise NotFound(f"no session with id {draft.session_id!r}")
        if current.epoch != epoch:
            reason = f"epoch {epoch} was superseded by {current.epoch}"
        else:
            reason = f"head moved from {draft.parent_turn_id} to {current.thread_id}"
        return CommitOutcome(status="fenced", reason=reason)

    def record_attempt(self, draft: TurnDraft, *, epoch: int) -> None:
        """Keep a failed or superseded attempt for audit, off the chain: no head moves."""
        if draft.status not in OFF_CHAIN_STATUSES:
            raise ValueError(
                f"record_attempt keeps {[s.value for s in OFF_CHAIN_STATUSES]} turns; "
                "completed and aborted turns go through commit()"
            )
        if draft.consumed or draft.compaction is not None:
            raise ValueError("an off-chain attempt consumes no queue items and compacts nothing")
        rows = self._rows(draft, epoch, self._clock())
        self._run(INSERT_TURN, rows.turn)
        self._insert_messages(rows)
        self._insert_tool_calls_and_compaction(draft, rows.now)

    # -- pieces of a commit --------------------------------------------------------------------

    def _turn_row(self, draft: TurnDraft, epoch: int, now: int) -> dict[str, object]:
        usage = draft.usage
        return {
            "id": draft.id,
            "session_id": draft.session_id,
            "parent_turn_id": draft.parent_turn_id,
            "turn_type": draft.turn_type,
            "status": draft.status,
            "queue_mode": draft.queue_mode,
            "epoch": epoch,
            "started_at": draft.started_at,
            "completed_at": draft.completed_at if draft.completed_at is not None else now,
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "total_tokens": usage.total,
            "context_tokens": draft.context_tokens,
            "cost_micros": draft.cost_micros,
            "price_version": draft.price_version,
            "model": draft.model,
            "stop_reason": draft.stop_reason,
            "error_kind": draft.error_kind,
            "error_message": draft.error_message,
            "source_event_id": draft.source_event_id,
            "model_settings": draft.model_settings,
        }

    def _rows(self, draft: TurnDraft, epoch: int, now: int) -> _CommitRows:
        return _CommitRows(
            head={
                "head_session_id": draft.session_id,
                "head_epoch": epoch,
                "head_expected": draft.parent_turn_id,
                "head_new": draft.id,
                "head_now": now,
                "head_started": draft.started_at,
            },
            turn=self._turn_row(draft, epoch, now),
            # What the thread row is derived from (the database adds the parent's part).
            thread={
                "turn_id": draft.id,
                "parent_turn_id": draft.parent_turn_id,
                "session_id": draft.session_id,
                "tokens": draft.usage.total,
                "own_anchor": draft.id if draft.turn_type == TurnType.COMPACTION else None,
                "now": now,
            },
            history={
                "id": new_id(),
                "session_id": draft.session_id,
                "thread_id": draft.id,
                "previous_thread_id": draft.parent_turn_id,
                "epoch": epoch,
                "reason": draft.turn_type.value,
                "changed_at": now,
            },
            messages=[
                {
                    "id": new_id(),
                    "turn_id": draft.id,
                    "sequence": sequence,
                    "role": message.role.value,
                    "source": message.source.value if message.source is not None else None,
                    "content": message.content,
                    "tool_call_id": message.tool_call_id,
                    "event_id": message.event_id,
                    "created_at": now,
                }
                for sequence, message in enumerate(draft.messages, start=1)
            ],
            items={
                "id": [item.queue_item_id for item in draft.consumed],
                "disposition": [item.disposition.value for item in draft.consumed],
                "session_id": draft.session_id,
                "turn_id": draft.id,
                "now": now,
            },
            now=now,
        )

    def _insert_messages(self, rows: _CommitRows) -> None:
        if not rows.messages:
            return
        self._run(INSERT_MESSAGES, rows.messages)

    def _insert_tool_calls_and_compaction(self, draft: TurnDraft, now: int) -> None:
        if draft.tool_calls:
            self._conn.execute(
                INSERT_TOOL_CALLS,
                [
                    {"id": new_id(), "turn_id": draft.id, "sequence": sequence, **call.model_dump()}
                    for sequence, call in enumerate(draft.tool_calls, start=1)
                ],
            )
        if draft.compaction is not None:
            values: dict[str, Any] = draft.compaction.model_dump(exclude={"metadata"})
            values.update(turn_id=draft.id, metadata_json=draft.compaction.metadata, created_at=now)
            self._conn.execute(INSERT_COMPACTION, values)

    def _consume_items(self, draft: TurnDraft, items: dict[str, Any]) -> None:
        for disposition in set(items["disposition"]):
            ids = [
                item_id
                for item_id, chosen in zip(items["id"], items["disposition"], strict=True)
                if chosen == disposition
            ]
            result = self._conn.execute(
                CONSUME_ITEMS,
                {
                    "item_ids": ids,
                    "item_session_id": items["session_id"],
                    "item_disposition": disposition,
                    "item_turn_id": items["turn_id"],
                    "item_now": items["now"],
                },
            )
            if result.rowcount != len(ids):
                raise LedgerConflict(_not_all_open(draft))


def _not_all_open(draft: TurnDraft) -> str:
    # Another disposition already reached one of these items; consuming it again would
    # answer one input twice. The caller's unit of work rolls back.
    ids = [item.queue_item_id for item in draft.consumed]
    return f"queue items {ids} of session {draft.session_id} are not all open"


def _committed(draft: TurnDraft, rows: _CommitRows) -> CommitOutcome:
    """The outcome of a commit that wrote `rows`, with the turn as a read would return it."""
    turn = TurnRecord.model_validate(
        {
            **{name: rows.turn[name] for name in TurnRecord.model_fields if name in rows.turn},
            "model_settings": draft.model_settings,  # the row holds it serialised on SQLite
        }
    )
    written = tuple(
        # Through JSON, as the column stores it: what the next read would see.
        MessageRecord.model_validate(
            {**message, "content": json.loads(json.dumps(message["content"]))}
        )
        for message in rows.messages
    )
    return CommitOutcome(
        status="committed",
        turn_id=draft.id,
        message_ids=tuple(message.id for message in written),
        view=TurnView(turn=turn, messages=written, tool_calls=()),
    )
