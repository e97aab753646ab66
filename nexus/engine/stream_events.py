"""The stream's vocabulary (pure): the event types a session's stream carries, and the
event itself. What publishes them, and how, is `nexus.engine.stream`."""

from __future__ import annotations

from typing import Any, NamedTuple

STEP_STARTED = "step.started"
STEP_GENERATING = "step.generating"
STEP_GENERATED = "step.generated"
STEP_ERROR = "step.error"
STEP_THINKING = "step.thinking"  # extended thinking as it streams, joined per interval
MESSAGE_DELTA = "message.delta"
MESSAGE_CREATED = "message.created"
TOOL_STARTED = "tool.started"
TOOL_COMPLETED = "tool.completed"
SESSION_STARTED = "session.started"
SESSION_COMPLETED = "session.completed"
SESSION_FAILED = "session.failed"
TURN_COMMITTED = "turn.committed"
# A turn's phases besides its model calls and tools: compacting the context (proactive,
# on overflow, or asked for) and committing what it came to.
CONTEXT_COMPACTING = "context.compacting"
TURN_COMPLETING = "turn.completing"
# A queue item's life, each published after the commit that decided it.
QUEUE_ITEM_QUEUED = "queue.item.queued"
QUEUE_ITEM_CONSUMED = "queue.item.consumed"  # consumed, batched or injected by a turn
QUEUE_ITEM_DROPPED = "queue.item.dropped"  # over the cap, or cancelled
QUEUE_ITEM_DEAD = "queue.item.dead"  # dead-lettered after its last attempt


class StreamEvent(NamedTuple):
    session_id: str
    type: str
    data: dict[str, Any]
    # Where the event sits in the ledger's copy (see `Mark`): "" for an event not kept.
    at: str = ""


class Mark(NamedTuple):
    """Where a stream event is in the ledger's `session_events`, carried beside it on the
    stream (never in its data): `s{sequence}` for a kept event published after its commit,
    `t{turn_id}:{n}` for the n-th event a running turn published (its turn's commit keeps
    it as the turn's n-th row). The SSE route makes event ids of these (nexus/api)."""

    sequence: int | None = None
    turn_id: str | None = None
    n: int | None = None

    def text(self) -> str:
        if self.sequence is not None:
            return f"s{self.sequence}"
        if self.turn_id is not None and self.n is not None:
            return f"t{self.turn_id}:{self.n}"
        return ""

    @classmethod
    def read(cls, at: str) -> Mark:
        """The mark an entry carries ("" or anything unreadable: none)."""
        if at.startswith("s") and at[1:].isdigit():
            return cls(sequence=int(at[1:]))
        turn, colon, n = at[1:].partition(":")
        if at.startswith("t") and colon and turn and n.isdigit():
            return cls(turn_id=turn, n=int(n))
        return cls()
