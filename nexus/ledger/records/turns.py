"""Turns: the drafts a run commits, and the turns, threads and context read back."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from nexus.ledger.enums import (
    CompactionTrigger,
    Disposition,
    MessageRole,
    MessageSource,
    QueueMode,
    ToolCallStatus,
    TurnStatus,
    TurnType,
)
from nexus.ledger.records.base import Record


class TokenUsage(Record):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class MessageDraft(Record):
    role: MessageRole
    content: dict[str, Any]
    source: MessageSource | None = None
    tool_call_id: str | None = None
    event_id: str | None = None


class ToolCallDraft(Record):
    provider_call_id: str
    tool_name: str
    parameters: dict[str, Any]
    result: Any = None
    error: str | None = None
    status: ToolCallStatus = ToolCallStatus.COMPLETED
    spawned_session_label: str | None = None
    started_at: int
    completed_at: int | None = None


class CompactionDraft(Record):
    summary: str
    summarized_through_turn_id: str | None
    first_kept_turn_id: str | None
    turns_summarized: int = Field(ge=0)
    trigger: CompactionTrigger
    model: str | None = None
    provider: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary_tokens: int | None = None
    summarization_input_tokens: int | None = None
    summarization_output_tokens: int | None = None
    duration_ms: int | None = None
    instructions: str | None = None
    compaction_type: str = "summary"
    metadata: dict[str, Any] = Field(default_factory=dict)


class ConsumedItem(Record):
    """A queue item this turn used up, and how (consumed, batched, injected)."""

    queue_item_id: str
    disposition: Literal[Disposition.CONSUMED, Disposition.BATCHED, Disposition.INJECTED]


class TurnDraft(Record):
    """A finished turn, ready to commit onto `parent_turn_id` (the head its run started from)."""

    id: str
    session_id: str
    parent_turn_id: str | None
    status: TurnStatus = TurnStatus.COMPLETED
    turn_type: TurnType = TurnType.NORMAL
    queue_mode: QueueMode | None = None
    started_at: int
    completed_at: int | None = None
    usage: TokenUsage = TokenUsage()
    # What `usage` cost when the turn ran (micro-dollars; None: its model had no price) and
    # the price table that said so: history keeps the price it was charged.
    cost_micros: int | None = Field(default=None, ge=0)
    price_version: str | None = Field(default=None, max_length=64)
    context_tokens: int | None = None
    model: str | None = None
    stop_reason: str | None = None
    error_kind: str | None = None
    error_message: str | None = None
    source_event_id: str | None = None
    messages: tuple[MessageDraft, ...] = ()
    tool_calls: tuple[ToolCallDraft, ...] = ()
    consumed: tuple[ConsumedItem, ...] = ()
    compaction: CompactionDraft | None = None
    model_settings: dict[str, Any] | None = None  # the effective model configuration


class CommitOutcome(Record):
    """`committed` moved the head to `turn_id`; `fenced` wrote nothing and says why."""

    status: Literal["committed", "fenced"]
    turn_id: str | None = None
    reason: str | None = None
    message_ids: tuple[str, ...] = ()  # the committed turn's messages, in sequence order
    # What a committed turn wrote, as a read would return it (without its tool-call rows):
    # the writer's context cache extends itself by it instead of reading it back.
    view: TurnView | None = None

    @property
    def committed(self) -> bool:
        return self.status == "committed"


class MessageRecord(Record):
    id: str
    turn_id: str
    sequence: int
    role: MessageRole
    content: dict[str, Any]
    source: MessageSource | None
    tool_call_id: str | None
    event_id: str | None
    created_at: int


class ToolCallRecord(Record):
    id: str
    turn_id: str
    sequence: int
    provider_call_id: str
    tool_name: str
    parameters: dict[str, Any]
    result: Any
    error: str | None
    status: ToolCallStatus
    spawned_session_label: str | None
    started_at: int
    completed_at: int | None


class TurnRecord(Record):
    id: str
    session_id: str
    parent_turn_id: str | None
    turn_type: TurnType
    status: TurnStatus
    queue_mode: QueueMode | None
    epoch: int
    started_at: int
    completed_at: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    total_tokens: int | None
    context_tokens: int | None = None
    model: str | None
    stop_reason: str | None
    error_kind: str | None
    error_message: str | None
    source_event_id: str | None
    model_settings: dict[str, Any] | None = None  # what the turn ran with, and from where
    abandoned_at: int | None = None  # a rollback of its session went back past it
    # Priced when it committed: micro-dollars (None: its model had no price) and the table.
    cost_micros: int | None = None
    price_version: str | None = None


class ThreadRecord(Record):
    turn_id: str
    parent_turn_id: str | None
    session_id: str
    persona_id: str
    depth: int
    total_tokens: int
    anchor_turn_id: str


class TurnView(Record):
    """A turn with its messages and tool calls, in order."""

    turn: TurnRecord
    messages: tuple[MessageRecord, ...]
    tool_calls: tuple[ToolCallRecord, ...]


class CompactionRecord(Record):
    turn_id: str
    summary: str
    summarized_through_turn_id: str | None
    first_kept_turn_id: str | None
    turns_summarized: int
    trigger: CompactionTrigger
    instructions: str | None


class ContextRead(Record):
    """What context assembly needs: the latest summary and the turns after it, oldest first,
    each with its messages (its `tool_calls` rows are not read: the messages hold them).

    `rows_read` counts the rows the read fetched, so callers and tests can see that the cost
    depends on the turns since the last compaction, not on the depth.
    """

    head: ThreadRecord | None
    compaction: CompactionRecord | None
    turns: tuple[TurnView, ...]
    rows_read: int
    # The depth of the head's anchor (the latest compaction, or the root): how many turns
    # the context's history holds above the summary is `head.depth - anchor_depth`.
    anchor_depth: int | None = None
