"""Inbound events and the people behind them: events, contacts, entities."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.enums import EventDirection, EventStatus, HookObligation
from nexus.ledger.models.base import Base, Millis, one_of

HOOKS_DUE = "hooks_status = 'due'"


class Event(Base):
    """Every message, callback, timer tick and reply, under a deterministic id."""

    __tablename__ = "events"
    __table_args__ = (
        one_of("status", EventStatus),
        one_of("direction", EventDirection),
        one_of("hooks_status", HookObligation),
        Index("ix_events_status_received_at", "status", "received_at"),
        Index("ix_events_container", "platform", "container_id"),
        # Only the events whose hooks are still owed: small, and what the relay reads.
        Index(
            "ix_events_hooks_due",
            "received_at",
            "id",
            postgresql_where=text(HOOKS_DUE),
            sqlite_where=text(HOOKS_DUE),
        ),
    )

    id: Mapped[str] = mapped_column(String(255), primary_key=True)  # {adapter}:{provider_id}
    adapter: Mapped[str] = mapped_column(String(64))
    platform: Mapped[str] = mapped_column(String(64))
    direction: Mapped[str] = mapped_column(String(16), default=EventDirection.INBOUND)
    kind: Mapped[str] = mapped_column(String(64), default="message")
    source: Mapped[str | None] = mapped_column(String(32))
    space: Mapped[str | None] = mapped_column(String(255))
    sender_id: Mapped[str | None] = mapped_column(String(255))
    sender_name: Mapped[str | None] = mapped_column(Text)
    container_kind: Mapped[str | None] = mapped_column(String(32))
    container_id: Mapped[str | None] = mapped_column(String(255))
    platform_thread_id: Mapped[str | None] = mapped_column(String(255))
    text: Mapped[str | None] = mapped_column(Text)
    attachments: Mapped[list[Any]] = mapped_column(default=list)
    reply_to: Mapped[str | None] = mapped_column(String(255))
    message_id: Mapped[str | None] = mapped_column(String(255))  # the platform's, for replies
    occurred_at: Mapped[int] = mapped_column(Millis)
    received_at: Mapped[int] = mapped_column(Millis)
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    contact_id: Mapped[str | None] = mapped_column(ForeignKey("contacts.id"))
    status: Mapped[str] = mapped_column(String(16), default=EventStatus.RECEIVED)
    disposition: Mapped[str | None] = mapped_column(String(32))
    disposition_detail: Mapped[str | None] = mapped_column(Text)
    processed_at: Mapped[int | None] = mapped_column(Millis)
    # The model configuration the turn that answers this event is to use (per-turn layer).
    model_overrides: Mapped[dict[str, Any] | None] = mapped_column()
    # Its evaluation by the hooks (HookObligation), written with the event: nexus/hooks/.
    hooks_status: Mapped[str | None] = mapped_column(String(8))


class Entity(Base):
    """A person or handle; merges form a union-find through `merged_into`."""

    __tablename__ = "entities"
    __table_args__ = (Index("ix_entities_merged_into", "merged_into"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    type: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(Text)
    merged_into: Mapped[str | None] = mapped_column(ForeignKey("entities.id"))
    tags: Mapped[list[Any]] = mapped_column(default=list)
    is_owner: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)


class Contact(Base):
    """(platform, sender) → entity: the pipeline-speed identity lookup."""

    __tablename__ = "contacts"
    __table_args__ = (UniqueConstraint("platform", "sender_id"),)

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    platform: Mapped[str] = mapped_column(String(64))
    sender_id: Mapped[str] = mapped_column(String(255))
    entity_id: Mapped[str] = mapped_column(ForeignKey("entities.id"))
    display_name: Mapped[str | None] = mapped_column(Text)
    first_seen_at: Mapped[int] = mapped_column(Millis)
    last_seen_at: Mapped[int] = mapped_column(Millis)
