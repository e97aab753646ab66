"""Frozen records that cross the repository boundary; rows never leave it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nexus.ledger.enums import (
    CompactionTrigger,
    DeliveryStatus,
    Disposition,
    DropPolicy,
    MessageRole,
    MessageSource,
    QueueMode,
    QueueStatus,
    SessionOrigin,
    TaskKind,
    ToolCallStatus,
    TurnStatus,
    TurnType,
)

# The caller-facing string types live beside the columns they are sized by; re-exported
# here, where the records that use them always found them.
from nexus.ledger.strings import NewSessionLabel as NewSessionLabel
from nexus.ledger.strings import SessionLabel as SessionLabel
from nexus.ledger.strings import StorableText as StorableText
from nexus.ledger.strings import check_new_label as check_new_label
from nexus.ledger.strings import column_length

MAX_LABEL_LENGTH = column_length("sessions", "label")


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentRecord(Record):
    id: str
    name: str
    system_prompt: str
    default_model: str | None
    permissions: dict[str, Any]
    status: str
    # A model configuration (nexus.engine.model_config), as the persona's defaults.
    default_model_config: dict[str, Any] = Field(default_factory=dict)
    # How the persona is shown: a line about it, an emoji, and tags to find it by.
    description: str | None = None
    emoji: str | None = None
    tags: list[str] = Field(default_factory=list)


class SessionRecord(Record):
    id: str
    label: str
    persona_id: str
    thread_id: str | None
    epoch: int
    origin: SessionOrigin
    root_turn_id: str | None = None
    status: str
    routing_key: str | None = None
    is_subagent: bool = False
    parent_session_label: str | None = None
    parent_turn_id: str | None = None
    spawn_tool_call_id: str | None = None
    task_description: str | None = None
    task_status: str | None = None
    queue_mode: QueueMode | None = None
    queue_cap: int | None = None
    drop_policy: DropPolicy | None = None
    debounce_ms: int | None = None
    model_overrides: dict[str, Any] | None = None  # the session's own model configuration
    source_event_id: str | None = None  # the event that created it, when one did
    title: str | None = None
    tags: list[str] | None = None
    started_at: int | None = None  # the first turn's start
    finished_at: int | None = None  # its worker task ended, or it was archived or deleted
    created_at: int
    updated_at: int


class NewSession(Record):
    """What is needed to create a session; everything else has a default."""

    label: SessionLabel
    persona_id: str
    origin: SessionOrigin = SessionOrigin.USER
    routing_key: str | None = None
    source_event_id: str | None = None
    queue_mode: QueueMode | None = None
    parent_session_label: str | None = None
    parent_turn_id: str | None = None
    spawn_tool_call_id: str | None = None
    task_description: str | None = None


class NewTask(Record):
    """A task dispatched to a session the caller did not spawn as a worker (`session_tasks`)."""

    event_id: str  # the event that carries it to the serving session
    caller_session_label: str
    caller_turn_id: str
    tool_call_id: str | None = None
    session_id: str  # the serving session
    kind: TaskKind
    description: str


class TaskRecord(NewTask):
    task_status: str  # pending until its answer (or failure) went back
    created_at: int
    updated_at: int


class TaskListing(Record):
    """A task as its caller's list shows it: with where its queue item stands (None: gone)."""

    task: TaskRecord
    queue_status: str | None


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


class EntityRecord(Record):
    id: str
    type: str
    name: str
    merged_into: str | None
    tags: list[str]
    is_owner: bool


class ContactRecord(Record):
    """One (platform, sender) and the entity it belongs to."""

    id: str
    platform: str
    sender_id: str
    entity_id: str
    display_name: str | None
    first_seen_at: int
    last_seen_at: int


class EventDraft(Record):
    id: str = Field(min_length=1, max_length=255)
    adapter: str
    platform: str
    kind: str = "message"
    direction: Literal["inbound", "outbound"] = "inbound"
    source: MessageSource | None = None
    space: str | None = None
    sender_id: str | None = None
    sender_name: str | None = None
    container_kind: str | None = None
    container_id: str | None = None
    platform_thread_id: str | None = None
    text: str | None = None
    attachments: tuple[dict[str, Any], ...] = ()
    reply_to: str | None = None
    message_id: str | None = None
    occurred_at: int
    payload: dict[str, Any] = Field(default_factory=dict)
    contact_id: str | None = None
    model_overrides: dict[str, Any] | None = None  # the answering turn's model configuration


class EventRecord(Record):
    id: str
    adapter: str
    platform: str
    kind: str
    direction: str
    source: MessageSource | None
    space: str | None
    sender_id: str | None
    sender_name: str | None
    contact_id: str | None
    container_kind: str | None
    container_id: str | None
    platform_thread_id: str | None
    text: str | None
    attachments: tuple[dict[str, Any], ...] = ()  # nexus.event.Attachment, as stored
    reply_to: str | None
    message_id: str | None
    occurred_at: int
    received_at: int
    status: str
    disposition: str | None
    disposition_detail: str | None
    model_overrides: dict[str, Any] | None = None
    hooks_status: str | None = None  # HookObligation, or None: owes the hooks nothing


class NewQueueItem(Record):
    session_id: str
    mode: QueueMode
    event_id: str | None = None
    priority: int = 0
    source: MessageSource | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    available_at: int | None = None


class QueueItemRecord(Record):
    id: str
    session_id: str
    event_id: str | None
    mode: QueueMode
    priority: int
    source: MessageSource | None
    payload: dict[str, Any]
    status: QueueStatus
    attempts: int
    claimed_epoch: int | None
    claim_expires_at: int | None
    available_at: int
    disposition: Disposition | None
    disposition_detail: str | None
    consumed_by_turn_id: str | None
    enqueued_at: int


class OpenWork(Record):
    """A session's unsettled queue as the watchdog sees it: whether a run claimed some of
    it, and since when its oldest due queued item waits (None: none is due)."""

    session_id: str
    claimed: bool
    due_at: int | None


class HookRecord(Record):
    name: str
    path: str
    description: str
    mode: str
    schedule: str | None
    enabled: bool
    content_hash: str | None
    breaker_state: str
    consecutive_errors: int
    opened_at: int | None
    state: dict[str, Any]
    last_fired_at: int | None


class DeliveryDraft(Record):
    """One chunk of a reply, recorded before anything is sent."""

    turn_id: str
    chunk_index: int = Field(ge=0)
    session_id: str
    event_id: str  # the outbound reply event
    platform: str  # the sender that carries it (the inbound adapter's name)
    target: dict[str, Any]
    text: str
    idempotency_key: str | None = None


class DeliveryRecord(Record):
    id: str
    turn_id: str
    chunk_index: int
    session_id: str
    event_id: str | None
    platform: str
    target: dict[str, Any]
    text: str
    status: DeliveryStatus
    attempts: int
    idempotency_key: str | None
    provider_message_id: str | None
    error: str | None
    next_attempt_at: int | None
    created_at: int
    updated_at: int


class MailboxRecord(Record):
    """A Gmail mailbox's watermark: every message up to `history_id` is stored."""

    mailbox: str
    history_id: int | None  # None: never synced (the next sync starts from now)
    synced_at: int | None  # when a sync last stored everything up to history_id
    watch_expires_at: int | None  # when Gmail stops pushing unless the watch is renewed
    updated_at: int
