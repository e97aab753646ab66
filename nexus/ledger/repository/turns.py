"""Committing turns: one transaction, compare-and-set on the session's head and epoch."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, CursorResult, Executable, select

from nexus.ids import Clock, new_id
from nexus.ledger.enums import CHAIN_STATUSES, OFF_CHAIN_STATUSES, TurnType
from nexus.ledger.records import CommitOutcome, TurnDraft
from nexus.ledger.repository import driver
from nexus.ledger.repository.errors import LedgerConflict, NotFound
from nexus.ledger.repository.turn_statements import (
    COMMIT_CHILD,
    CONSUME_ITEMS,
    INSERT_CHILD_THREAD,
    INSERT_COMPACTION,
    INSERT_HISTORY,
    INSERT_MESSAGES,
    INSERT_ROOT_THREAD,
    INSERT_TOOL_CALLS,
    INSERT_TURN,
    LOCK_HEAD,
    MOVE_HEAD,
    READ_HEAD,
    tool_calls,
    turns,
)


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
        consumed (DESIGN §1 rule 4).
        """
        if draft.status not in CHAIN_STATUSES:
            raise ValueError(
                f"only {[s.value for s in CHAIN_STATUSES]} turns join a chain; record a "
                f"{draft.status.value} attempt with record_attempt()"
            )
        if (draft.compaction is not None) != (draft.turn_type == TurnType.COMPACTION):
            raise ValueError("a compaction turn needs compaction metadata, and only it may have it")

        now = self._clock()
        if self._postgres and draft.parent_turn_id is not None:
            return self._commit_child_in_one_statement(draft, epoch, now)
        return self._commit_in_steps(draft, epoch, now)

    def _commit_in_steps(self, draft: TurnDraft, epoch: int, now: int) -> CommitOutcome:
        """SQLite, and a session's first turn on Postgres: the compare-and-set as a locking
        read, so a fenced attempt writes nothing; then the rows; the pointer last.

        Last, because SQLite settles a deferred foreign key (sessions.thread_id) by scanning
        `sessions` on every insert into `turns` while one is pending: pointing the session
        at a turn that does not exist yet made each commit cost O(sessions).
        """
        head = {
            "b_session_id": draft.session_id,
            "b_epoch": epoch,
            "b_expected_head": draft.parent_turn_id,
            "b_new_head": draft.id,
            "b_now": now,
        }
        persona_id = self._run(LOCK_HEAD, head).scalar_one_or_none()
        if persona_id is None:
            return self._fenced(draft, epoch)
        self._insert_turn_row(draft, epoch, now)
        self._insert_thread(draft, persona_id, now)
        self._insert_history(draft, epoch, now)
        self._insert_messages(draft, now)
        self._insert_tool_calls_and_compaction(draft, now)
        self._run(MOVE_HEAD, head)
        self._consume_items(draft, now)
        return CommitOutcome(status="committed", turn_id=draft.id)

    def _run(
        self, statement: Executable, params: dict[str, Any] | list[dict[str, Any]]
    ) -> CursorResult[Any]:
        """A hot statement: straight to the driver on SQLite, through Core on Postgres."""
        if self._postgres:
            return self._conn.execute(statement, params)
        return driver.run(self._conn, statement, params)

    def _commit_child_in_one_statement(
        self, draft: TurnDraft, epoch: int, now: int
    ) -> CommitOutcome:
        """Postgres: the compare-and-set and everything a plain turn writes in one round
        trip; tool calls and a compaction row, when there are any, follow it."""
        wrote = self._conn.execute(COMMIT_CHILD, self._fused_params(draft, epoch, now)).one()
        if not wrote.threads:
            return self._fenced_or_orphaned(draft, epoch)
        if wrote.consumed != len(draft.consumed):
            raise LedgerConflict(_not_all_open(draft))
        self._insert_tool_calls_and_compaction(draft, now)
        return CommitOutcome(status="committed", turn_id=draft.id)

    def _insert_history(self, draft: TurnDraft, epoch: int, now: int) -> None:
        self._run(
            INSERT_HISTORY,
            {
                "id": new_id(),
                "session_id": draft.session_id,
                "thread_id": draft.id,
                "previous_thread_id": draft.parent_turn_id,
                "epoch": epoch,
                "reason": draft.turn_type.value,
                "changed_at": now,
            },
        )

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

    def source_event_id(self, turn_id: str) -> str | None:
        """The event a turn answered (its first query's), or None."""
        found = self._conn.execute(
            select(turns.c.source_event_id).where(turns.c.id == turn_id)
        ).scalar_one_or_none()
        return str(found) if found is not None else None

    def record_attempt(self, draft: TurnDraft, *, epoch: int) -> None:
        """Keep a failed or superseded attempt for audit, off the chain: no head moves."""
        if draft.status not in OFF_CHAIN_STATUSES:
            raise ValueError(
                f"record_attempt keeps {[s.value for s in OFF_CHAIN_STATUSES]} turns; "
                "completed and aborted turns go through commit()"
            )
        if draft.consumed or draft.compaction is not None:
            raise ValueError("an off-chain attempt consumes no queue items and compacts nothing")
        now = self._clock()
        self._insert_turn_row(draft, epoch, now)
        self._insert_messages(draft, now)
        self._insert_tool_calls_and_compaction(draft, now)

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
            "model": draft.model,
            "stop_reason": draft.stop_reason,
            "error_kind": draft.error_kind,
            "error_message": draft.error_message,
            "source_event_id": draft.source_event_id,
        }

    def _insert_turn_row(self, draft: TurnDraft, epoch: int, now: int) -> None:
        self._run(INSERT_TURN, self._turn_row(draft, epoch, now))

    def _fused_params(self, draft: TurnDraft, epoch: int, now: int) -> dict[str, Any]:
        params = {f"t_{name}": value for name, value in self._turn_row(draft, epoch, now).items()}
        params.update(
            b_session_id=draft.session_id,
            b_epoch=epoch,
            b_expected_head=draft.parent_turn_id,
            b_new_head=draft.id,
            b_now=now,
            h_id=new_id(),
            h_reason=draft.turn_type.value,
            h_now=now,
            # Prefixed: a parameter named like a sessions column (parent_turn_id) would be
            # taken as one more SET of the UPDATE in the statement.
            c_turn_id=draft.id,
            c_parent_turn_id=draft.parent_turn_id,
            c_session_id=draft.session_id,
            c_tokens=draft.usage.total,
            c_own_anchor=draft.id if draft.turn_type == TurnType.COMPACTION else None,
            c_now=now,
            # Messages and consumed items as parallel arrays, unnested by the statement.
            m_id=[new_id() for _ in draft.messages],
            m_sequence=list(range(1, len(draft.messages) + 1)),
            m_role=[m.role.value for m in draft.messages],
            m_source=[m.source.value if m.source is not None else None for m in draft.messages],
            m_content=[json.dumps(m.content) for m in draft.messages],
            m_tool_call_id=[m.tool_call_id for m in draft.messages],
            m_event_id=[m.event_id for m in draft.messages],
            m_now=now,
            q_id=[item.queue_item_id for item in draft.consumed],
            q_disposition=[item.disposition.value for item in draft.consumed],
        )
        return params

    def _insert_messages(self, draft: TurnDraft, now: int) -> None:
        if draft.messages:
            self._run(
                INSERT_MESSAGES,
                [
                    {
                        "id": new_id(),
                        "turn_id": draft.id,
                        "sequence": sequence,
                        "role": message.role,
                        "source": message.source,
                        "content": message.content
                        if self._postgres
                        else json.dumps(message.content),
                        "tool_call_id": message.tool_call_id,
                        "event_id": message.event_id,
                        "created_at": now,
                    }
                    for sequence, message in enumerate(draft.messages, start=1)
                ],
            )

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

    def _insert_thread(self, draft: TurnDraft, persona_id: str, now: int) -> None:
        tokens = draft.usage.total
        if draft.parent_turn_id is None:
            self._run(
                INSERT_ROOT_THREAD,
                {
                    "turn_id": draft.id,
                    "parent_turn_id": None,
                    "session_id": draft.session_id,
                    "persona_id": persona_id,
                    "depth": 1,
                    "total_tokens": tokens,
                    "anchor_turn_id": draft.id,
                    "created_at": now,
                },
            )
            return
        inserted = self._run(
            INSERT_CHILD_THREAD,
            {
                "turn_id": draft.id,
                "parent_turn_id": draft.parent_turn_id,
                "session_id": draft.session_id,
                "persona_id": persona_id,
                "tokens": tokens,
                "own_anchor": draft.id if draft.turn_type == TurnType.COMPACTION else None,
                "now": now,
            },
        )
        if inserted.rowcount != 1:
            raise LedgerConflict(f"parent turn {draft.parent_turn_id!r} has no thread row")

    def _consume_items(self, draft: TurnDraft, now: int) -> None:
        for disposition in {item.disposition for item in draft.consumed}:
            ids = [item.queue_item_id for item in draft.consumed if item.disposition == disposition]
            result = self._conn.execute(
                CONSUME_ITEMS,
                {
                    "q_ids": ids,
                    "q_session_id": draft.session_id,
                    "q_disposition": disposition,
                    "q_turn_id": draft.id,
                    "q_now": now,
                },
            )
            if result.rowcount != len(ids):
                raise LedgerConflict(_not_all_open(draft))

    def tool_call_row_id(self, turn_id: str, provider_call_id: str) -> str | None:
        """The ledger's id of a tool call, from the model's id for it."""
        found = self._conn.execute(
            select(tool_calls.c.id)
            .where(tool_calls.c.turn_id == turn_id)
            .where(tool_calls.c.provider_call_id == provider_call_id)
        ).scalar_one_or_none()
        return None if found is None else str(found)


def _not_all_open(draft: TurnDraft) -> str:
    # Another disposition already reached one of these items; consuming it again would
    # answer one input twice. The caller's unit of work rolls back.
    ids = [item.queue_item_id for item in draft.consumed]
    return f"queue items {ids} of session {draft.session_id} are not all open"
