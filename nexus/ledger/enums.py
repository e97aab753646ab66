"""Closed vocabularies of the ledger; stored as text and guarded by CHECK constraints."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class TurnStatus(StrEnum):
    PENDING = "pending"
    STREAMING = "streaming"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTED = "aborted"
    SUPERSEDED = "superseded"


# Turns with these statuses form a session's chain and may become its head. Failed and
# superseded attempts are kept for audit but stay off the chain, so they never fork it.
CHAIN_STATUSES: tuple[TurnStatus, ...] = (TurnStatus.COMPLETED, TurnStatus.ABORTED)
OFF_CHAIN_STATUSES: tuple[TurnStatus, ...] = (TurnStatus.FAILED, TurnStatus.SUPERSEDED)


class TurnType(StrEnum):
    NORMAL = "normal"
    COMPACTION = "compaction"


class SessionOrigin(StrEnum):
    USER = "user"
    SYSTEM = "system"
    SUBAGENT = "subagent"
    FORK = "fork"


class SessionStatus(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    DELETED = "deleted"


class TaskStatus(StrEnum):
    """A worker session's task: pending at dispatch, running while a run has its input,
    then completed (its answer went to the parent), failed (its input was dead-lettered)
    or cancelled (by an operator; final)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TaskKind(StrEnum):
    """Where a tracked task went (`session_tasks.kind`): an existing session, or a fork."""

    SESSION = "session"
    FORK = "fork"


class MessageRole(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


class MessageSource(StrEnum):
    HUMAN = "human"
    TRIGGER = "trigger"
    AGENT = "agent"
    WEBHOOK = "webhook"
    CRON = "cron"
    EVENT = "event"


class ToolCallStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"


# What a queue over its cap drops (docs/runtime.md, "Caps"): the oldest, the newest, or the
# oldest with a summary of them for the next turn.
DropPolicy = Literal["old", "new", "summarize"]
# A collect window longer than this is a mistake (an hour: a conversation gone quiet).
MAX_DEBOUNCE_MS = 3_600_000


class QueueMode(StrEnum):
    INTERRUPT = "interrupt"
    STEER = "steer"
    STEER_BACKLOG = "steer-backlog"
    FOLLOWUP = "followup"
    COLLECT = "collect"
    QUEUE = "queue"


class QueueStatus(StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    DONE = "done"
    DROPPED = "dropped"
    DEAD = "dead"


OPEN_QUEUE_STATUSES: tuple[QueueStatus, ...] = (QueueStatus.QUEUED, QueueStatus.CLAIMED)


class Disposition(StrEnum):
    """What finally became of an input: exactly one per queue item (invariant 6)."""

    CONSUMED = "consumed"
    BATCHED = "batched"
    INJECTED = "injected"
    DROPPED = "dropped"
    CANCELLED = "cancelled"
    DENIED = "denied"
    DEAD_LETTERED = "dead_lettered"


class EventStatus(StrEnum):
    RECEIVED = "received"
    PROCESSED = "processed"


class EventDirection(StrEnum):
    INBOUND = "inbound"
    OUTBOUND = "outbound"


class CompactionTrigger(StrEnum):
    PROACTIVE = "proactive"
    OVERFLOW = "overflow"
    MANUAL = "manual"


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"
    FAILED = "failed"


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class HookMode(StrEnum):
    PERSISTENT = "persistent"
    ONE_SHOT = "one-shot"


class HookObligation(StrEnum):
    """An event's evaluation by the hooks (`events.hooks_status`), written with the event:
    `due` until every hook that applies has its invocation, then `done`; never back. An
    event that owes the hooks nothing (fired by a hook, outbound, or stored while no hook
    was enabled) has none (NULL)."""

    DUE = "due"
    DONE = "done"


class AgentStatus(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
