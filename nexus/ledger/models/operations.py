"""Hooks and their invocations, outbound deliveries, and the timer watermark."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.enums import BreakerState, DeliveryStatus, HookMode
from nexus.ledger.models.base import Base, Millis, one_of


class Hook(Base):
    """A user script found in the hooks directory, with its breaker state and own state."""

    __tablename__ = "hooks"
    __table_args__ = (one_of("mode", HookMode), one_of("breaker_state", BreakerState))

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    path: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    mode: Mapped[str] = mapped_column(String(16), default=HookMode.PERSISTENT)
    schedule: Mapped[str | None] = mapped_column(String(128))
    enabled: Mapped[bool] = mapped_column(default=True)
    content_hash: Mapped[str | None] = mapped_column(String(64))
    breaker_state: Mapped[str] = mapped_column(String(16), default=BreakerState.CLOSED)
    consecutive_errors: Mapped[int] = mapped_column(Integer, default=0)
    opened_at: Mapped[int | None] = mapped_column(Millis)
    state: Mapped[dict[str, Any]] = mapped_column(default=dict)
    last_fired_at: Mapped[int | None] = mapped_column(Millis)
    created_at: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)


class HookInvocation(Base):
    """One evaluation of one hook against one event."""

    __tablename__ = "hook_invocations"
    __table_args__ = (
        Index("ix_hook_invocations_hook_name_started_at", "hook_name", "started_at"),
        # One invocation per hook and event: a hook is evaluated on an event at most once.
        Index("ux_hook_invocations_event_id_hook_name", "event_id", "hook_name", unique=True),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    hook_name: Mapped[str] = mapped_column(ForeignKey("hooks.name"))
    event_id: Mapped[str | None] = mapped_column(String(255))
    started_at: Mapped[int] = mapped_column(Millis)
    latency_ms: Mapped[int] = mapped_column(Integer)
    fired: Mapped[bool] = mapped_column(default=False)
    result: Mapped[dict[str, Any] | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(Text)


class Delivery(Base):
    """One outbound chunk of one turn's reply; the intent is recorded before it is sent."""

    __tablename__ = "deliveries"
    __table_args__ = (
        one_of("status", DeliveryStatus),
        UniqueConstraint("turn_id", "chunk_index"),
        Index("ix_deliveries_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_deliveries_provider_message_id", "platform", "provider_message_id"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id"))
    chunk_index: Mapped[int] = mapped_column(Integer)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    event_id: Mapped[str | None] = mapped_column(ForeignKey("events.id"))
    platform: Mapped[str] = mapped_column(String(64))
    target: Mapped[dict[str, Any]] = mapped_column(default=dict)
    text: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default=DeliveryStatus.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    provider_message_id: Mapped[str | None] = mapped_column(String(255))
    error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[int | None] = mapped_column(Millis)
    created_at: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)


class TimerState(Base):
    """The timer's watermark: the last minute whose tick has been emitted."""

    __tablename__ = "timer_state"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_minute: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)
