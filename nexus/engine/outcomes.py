"""What a run reads and what it reports: the snapshot, the outcomes, the commit's stream events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nexus.db import UnitOfWork
from nexus.engine.stream import committed
from nexus.engine.stream_events import StreamEvent
from nexus.engine.turn import TurnResult
from nexus.ledger.records import (
    AgentRecord,
    CommitOutcome,
    ContextRead,
    EventRecord,
    SessionRecord,
    TurnDraft,
)

# Runs inside the transaction that commits a turn (say, a worker reporting to its parent).
# Its last argument is the event the turn answered (its first query's) as the run read it,
# or None when the run did not read one: a hook that needs it then reads it itself.
CommitHook = Callable[[UnitOfWork, SessionRecord, str, TurnResult, EventRecord | None], None]


@dataclass(frozen=True)
class Snapshot:
    """What a run reads before it starts: the session as of its claim."""

    session: SessionRecord
    persona: AgentRecord
    capability_ids: tuple[str, ...]
    context: ContextRead
    anchor_depth: int | None


@dataclass(frozen=True)
class CompactionOutcome:
    status: str  # committed | fenced | nothing
    turn_id: str | None = None
    summary: str | None = None
    fallback: bool = False
    turns_summarized: int = 0


@dataclass(frozen=True)
class TurnOutcome:
    status: str  # committed | fenced | failed
    turn_id: str
    result: TurnResult | None
    compactions: tuple[CompactionOutcome, ...] = ()


def reported(draft: TurnDraft, outcome: CommitOutcome, status: str) -> list[StreamEvent]:
    """The stream events a committed turn owes its watchers (published after the commit)."""
    roles = [message.role.value for message in draft.messages]
    return committed(
        draft.session_id,
        draft.id,
        messages=list(zip(outcome.message_ids, roles, strict=True)),
        consumed=[(item.queue_item_id, item.disposition.value) for item in draft.consumed],
        status=status,
    )
