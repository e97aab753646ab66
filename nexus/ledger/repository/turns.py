"""Committing turns: one transaction, compare-and-set on the session's head and epoch."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, String, bindparam, func, insert, select, true, update

from nexus.ids import Clock, new_id
from nexus.ledger.enums import (
    CHAIN_STATUSES,
    OFF_CHAIN_STATUSES,
    OPEN_QUEUE_STATUSES,
    QueueStatus,
    TurnType,
)
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
from nexus.ledger.records import CommitOutcome, TurnDraft
from nexus.ledger.repository.errors import LedgerConflict, NotFound

turns = table_of(Turn)
threads = table_of(Thread)
messages = table_of(Message)
tool_calls = table_of(ToolCall)
compactions = table_of(Compaction)
sessions = table_of(Session)
history = table_of(SessionHistory)
queue_items = table_of(QueueItem)

# The commit path runs once per turn on every worker, so its statements are built once here
# and executed with parameters: building SQLAlchemy expressions per call cost more than the
# database round trips they make.
# The compare-and-set itself: it moves the head only if neither the head nor the epoch moved
# since the run began, and it takes the session's row lock (Postgres re-checks the condition
# against a concurrent winner's committed row), so every later write in this transaction is
# serialised behind it.
_SWING_HEAD = (
    update(sessions)
    .where(sessions.c.id == bindparam("b_session_id"))
    .where(sessions.c.epoch == bindparam("b_epoch"))
    .where(sessions.c.thread_id.is_not_distinct_from(bindparam("b_expected_head", type_=String)))
    .values(thread_id=bindparam("b_new_head"), updated_at=bindparam("b_now"))
    .returning(sessions.c.persona_id)
)
_TURN_COLUMNS = [column.name for column in turns.c]

_READ_HEAD = select(sessions.c.thread_id, sessions.c.epoch).where(
    sessions.c.id == bindparam("session_id")
)
_INSERT_TURN = insert(turns)
_INSERT_MESSAGES = insert(messages)
_INSERT_TOOL_CALLS = insert(tool_calls)
_INSERT_COMPACTION = insert(compactions)
_INSERT_HISTORY = insert(history)
_INSERT_ROOT_THREAD = insert(threads)
_parent = threads.alias("parent")
# A child's thread row is derived from its parent's inside the database: one round trip and
# no window for a stale read. A compaction turn anchors itself; others inherit the anchor.
_THREAD_COLUMNS = [
    "turn_id",
    "parent_turn_id",
    "session_id",
    "persona_id",
    "depth",
    "total_tokens",
    "anchor_turn_id",
    "created_at",
]
_INSERT_CHILD_THREAD = insert(threads).from_select(
    _THREAD_COLUMNS,
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


# On Postgres a child turn (the path nearly every turn takes) is one statement: the
# compare-and-set, the turn, its pointer-history row and its thread row, as data-modifying
# CTEs (foreign keys are checked at the end of the statement). Every insert selects FROM
# the CAS's returned row, so a fenced attempt writes nothing at all. SQLite runs separate
# statements in-process, where round trips cost nothing.
_swing = _SWING_HEAD.cte("swing")
_new_turn = (
    insert(turns)
    .from_select(
        _TURN_COLUMNS,
        select(
            *(bindparam(f"t_{name}", type_=turns.c[name].type) for name in _TURN_COLUMNS)
        ).select_from(_swing),
    )
    .returning(turns.c.id)
    .cte("new_turn")
)
_pointer_moved = (
    insert(history)
    .from_select(
        ["id", "session_id", "thread_id", "previous_thread_id", "epoch", "reason", "changed_at"],
        select(
            bindparam("h_id", type_=String),
            bindparam("t_session_id", type_=String),
            _new_turn.c.id,
            bindparam("t_parent_turn_id", type_=String),
            bindparam("t_epoch", type_=turns.c.epoch.type),
            bindparam("h_reason", type_=String),
            bindparam("h_now", type_=history.c.changed_at.type),
        ),
    )
    .cte("pointer_moved")
)
_CAS_AND_CHILD = (
    insert(threads)
    .from_select(
        _THREAD_COLUMNS,
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
    .add_cte(_swing, _new_turn, _pointer_moved)
)


class TurnRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

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
        if self._conn.dialect.name == "postgresql" and draft.parent_turn_id is not None:
            if self._conn.execute(_CAS_AND_CHILD, self._fused_params(draft, epoch, now)).rowcount:
                self._insert_turn_children(draft, now)
                self._consume_items(draft, now)
                return CommitOutcome(status="committed", turn_id=draft.id)
            return self._fenced_or_orphaned(draft, epoch)
        persona_id = self._conn.execute(
            _SWING_HEAD,
            {
                "b_session_id": draft.session_id,
                "b_epoch": epoch,
                "b_expected_head": draft.parent_turn_id,
                "b_new_head": draft.id,
                "b_now": now,
            },
        ).scalar_one_or_none()
        if persona_id is None:
            return self._fenced(draft, epoch)
        self._insert_turn_row(draft, epoch, now)
        self._insert_thread(draft, persona_id, now)
        self._insert_history(draft, epoch, now)
        self._insert_turn_children(draft, now)
        self._consume_items(draft, now)
        return CommitOutcome(status="committed", turn_id=draft.id)

    def _insert_history(self, draft: TurnDraft, epoch: int, now: int) -> None:
        self._conn.execute(
            _INSERT_HISTORY,
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
        current = self._conn.execute(_READ_HEAD, {"session_id": draft.session_id}).one_or_none()
        if current is not None and current.thread_id == draft.id and current.epoch == epoch:
            raise LedgerConflict(f"parent turn {draft.parent_turn_id!r} has no thread row")
        return self._fenced(draft, epoch)

    def _fenced(self, draft: TurnDraft, epoch: int) -> CommitOutcome:
        current = self._conn.execute(_READ_HEAD, {"session_id": draft.session_id}).one_or_none()
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
        self._insert_turn_children(draft, now)

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
        self._conn.execute(_INSERT_TURN, self._turn_row(draft, epoch, now))

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
        )
        return params

    def _insert_turn_children(self, draft: TurnDraft, now: int) -> None:
        if draft.messages:
            self._conn.execute(
                _INSERT_MESSAGES,
                [
                    {
                        "id": new_id(),
                        "turn_id": draft.id,
                        "sequence": sequence,
                        "role": message.role,
                        "source": message.source,
                        "content": message.content,
                        "tool_call_id": message.tool_call_id,
                        "event_id": message.event_id,
                        "created_at": now,
                    }
                    for sequence, message in enumerate(draft.messages, start=1)
                ],
            )
        if draft.tool_calls:
            self._conn.execute(
                _INSERT_TOOL_CALLS,
                [
                    {"id": new_id(), "turn_id": draft.id, "sequence": sequence, **call.model_dump()}
                    for sequence, call in enumerate(draft.tool_calls, start=1)
                ],
            )
        if draft.compaction is not None:
            values: dict[str, Any] = draft.compaction.model_dump(exclude={"metadata"})
            values.update(turn_id=draft.id, metadata_json=draft.compaction.metadata, created_at=now)
            self._conn.execute(_INSERT_COMPACTION, values)

    def _insert_thread(self, draft: TurnDraft, persona_id: str, now: int) -> None:
        tokens = draft.usage.total
        if draft.parent_turn_id is None:
            self._conn.execute(
                _INSERT_ROOT_THREAD,
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
        inserted = self._conn.execute(
            _INSERT_CHILD_THREAD,
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
                update(queue_items)
                .where(queue_items.c.id.in_(ids))
                .where(queue_items.c.session_id == draft.session_id)
                .where(queue_items.c.status.in_(OPEN_QUEUE_STATUSES))
                .values(
                    status=QueueStatus.DONE,
                    disposition=disposition,
                    consumed_by_turn_id=draft.id,
                    claim_expires_at=None,
                    updated_at=now,
                )
            )
            if result.rowcount != len(ids):
                # Another disposition already reached one of these items; consuming it
                # again would answer one input twice. The caller's unit of work rolls back.
                raise LedgerConflict(
                    f"queue items {ids} of session {draft.session_id} are not all open"
                )

    def tool_call_row_id(self, turn_id: str, provider_call_id: str) -> str | None:
        """The ledger's id of a tool call, from the model's id for it."""
        found = self._conn.execute(
            select(tool_calls.c.id)
            .where(tool_calls.c.turn_id == turn_id)
            .where(tool_calls.c.provider_call_id == provider_call_id)
        ).scalar_one_or_none()
        return None if found is None else str(found)
