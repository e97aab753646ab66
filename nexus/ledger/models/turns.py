"""The turn tree: turns, their thread rows, messages, tool calls and compactions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.enums import (
    CHAIN_STATUSES,
    CompactionTrigger,
    MessageRole,
    ToolCallStatus,
    TurnStatus,
    TurnType,
)
from nexus.ledger.models.base import Base, JsonColumn, Millis, one_of

_ON_CHAIN = "status IN ({})".format(", ".join(f"'{s.value}'" for s in CHAIN_STATUSES))
CHAIN_CHILD = f"{_ON_CHAIN} AND parent_turn_id IS NOT NULL AND abandoned_at IS NULL"


class Turn(Base):
    """One query + response exchange; the addressable unit, like a git commit."""

    __tablename__ = "turns"
    __table_args__ = (
        one_of("status", TurnStatus),
        one_of("turn_type", TurnType),
        Index("ix_turns_session_id_started_at", "session_id", "started_at"),
        Index("ix_turns_parent_turn_id", "parent_turn_id"),
        # Usage by day since a date (GET /v1/usage) without a session to narrow it.
        Index("ix_turns_started_at", "started_at"),
        # A session's chain is linear: one chain child per parent, one root, per session.
        # Forks live in other sessions, so the global tree may still branch anywhere; a
        # rollback's abandoned turns are off the chain (migration 0014).
        Index(
            "uq_turns_chain_child",
            "session_id",
            "parent_turn_id",
            unique=True,
            postgresql_where=text(CHAIN_CHILD),
            sqlite_where=text(CHAIN_CHILD),
        ),
        Index(
            "uq_turns_chain_root",
            "session_id",
            unique=True,
            postgresql_where=text(f"{_ON_CHAIN} AND parent_turn_id IS NULL"),
            sqlite_where=text(f"{_ON_CHAIN} AND parent_turn_id IS NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    parent_turn_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id"))
    turn_type: Mapped[str] = mapped_column(String(16), default=TurnType.NORMAL)
    status: Mapped[str] = mapped_column(String(16))
    queue_mode: Mapped[str | None] = mapped_column(String(16))
    epoch: Mapped[int] = mapped_column(BigInteger)
    started_at: Mapped[int] = mapped_column(Millis)
    completed_at: Mapped[int | None] = mapped_column(Millis)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    cache_read_tokens: Mapped[int | None] = mapped_column(Integer)
    cache_write_tokens: Mapped[int | None] = mapped_column(Integer)
    total_tokens: Mapped[int | None] = mapped_column(Integer)
    # The context's size right after this turn (last model call's input + output), exact.
    context_tokens: Mapped[int | None] = mapped_column(Integer)
    # Priced when committed (migration 0008): micro-dollars, None for a model with no price,
    # and the price table's version, so a later price change never rewrites history.
    cost_micros: Mapped[int | None] = mapped_column(BigInteger)
    price_version: Mapped[str | None] = mapped_column(String(64))
    model: Mapped[str | None] = mapped_column(String(255))
    stop_reason: Mapped[str | None] = mapped_column(String(64))
    error_kind: Mapped[str | None] = mapped_column(String(32))
    error_message: Mapped[str | None] = mapped_column(Text)
    source_event_id: Mapped[str | None] = mapped_column(String(255))
    # The model configuration the turn ran with, each field with the layer it came from.
    model_settings: Mapped[dict[str, Any] | None] = mapped_column()
    # When a rollback of its session went back past it: kept, but off the session's chain.
    abandoned_at: Mapped[int | None] = mapped_column(Millis)


class Thread(Base):
    """A turn seen with its ancestry: depth, running token total, and its context anchor."""

    __tablename__ = "threads"
    # Read by primary key only (context reads climb parent links by turn id); on SQLite it
    # is stored in that key's B-tree (migration 0004).
    __table_args__ = {"sqlite_with_rowid": False}

    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id"), primary_key=True)
    parent_turn_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id"))
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    persona_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    depth: Mapped[int] = mapped_column(Integer)
    total_tokens: Mapped[int] = mapped_column(BigInteger)
    # The latest compaction turn on the path (or the root): context reads start there, so
    # they cost O(turns since the last compaction), never O(depth).
    anchor_turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id"))
    created_at: Mapped[int] = mapped_column(Millis)


class Message(Base):
    """A message within a turn; `content` follows the Everruns schema of its role."""

    __tablename__ = "messages"
    __table_args__ = (
        one_of("role", MessageRole),
        UniqueConstraint("turn_id", "sequence"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id"))
    sequence: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    source: Mapped[str | None] = mapped_column(String(16))
    content: Mapped[dict[str, Any]] = mapped_column()
    tool_call_id: Mapped[str | None] = mapped_column(String(255))
    event_id: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[int] = mapped_column(Millis)


class ToolCall(Base):
    """A tool invocation inside a turn, with its parameters, result and timing."""

    __tablename__ = "tool_calls"
    __table_args__ = (
        one_of("status", ToolCallStatus),
        UniqueConstraint("turn_id", "sequence"),
        Index("ix_tool_calls_tool_name", "tool_name"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id"))
    sequence: Mapped[int] = mapped_column(Integer)
    provider_call_id: Mapped[str] = mapped_column(String(255))
    tool_name: Mapped[str] = mapped_column(String(255))
    parameters: Mapped[dict[str, Any]] = mapped_column()
    result: Mapped[Any | None] = mapped_column(JsonColumn)
    error: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    spawned_session_label: Mapped[str | None] = mapped_column(String(512))
    started_at: Mapped[int] = mapped_column(Millis)
    completed_at: Mapped[int | None] = mapped_column(Millis)


class Compaction(Base):
    """The metadata of a compaction turn (docs/engine.md), one row per compaction turn."""

    __tablename__ = "compactions"
    __table_args__ = (one_of("trigger", CompactionTrigger),)

    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id"), primary_key=True)
    summary: Mapped[str] = mapped_column(Text)
    summarized_through_turn_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id"))
    first_kept_turn_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id"))
    turns_summarized: Mapped[int] = mapped_column(Integer)
    compaction_type: Mapped[str] = mapped_column(String(32), default="summary")
    model: Mapped[str | None] = mapped_column(String(255))
    provider: Mapped[str | None] = mapped_column(String(64))
    tokens_before: Mapped[int | None] = mapped_column(Integer)
    tokens_after: Mapped[int | None] = mapped_column(Integer)
    summary_tokens: Mapped[int | None] = mapped_column(Integer)
    summarization_input_tokens: Mapped[int | None] = mapped_column(Integer)
    summarization_output_tokens: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(16))
    instructions: Mapped[str | None] = mapped_column(Text)
    metadata_json: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[int] = mapped_column(Millis)
