"""Personas, sessions and the tasks dispatched to them, as records."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nexus.ledger.enums import DropPolicy, QueueMode, SessionOrigin, TaskKind
from nexus.ledger.records.base import Record
from nexus.ledger.strings import SessionLabel, column_length

MAX_LABEL_LENGTH = column_length("sessions", "label")


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
