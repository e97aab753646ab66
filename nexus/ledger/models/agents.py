"""Personas (agents) and the capabilities they carry, in order."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.enums import AgentStatus
from nexus.ledger.models.base import Base, Millis, one_of


class Agent(Base):
    """A persona: identity (soul, name) plus permissions and model defaults."""

    __tablename__ = "agents"
    __table_args__ = (one_of("status", AgentStatus),)

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    system_prompt: Mapped[str] = mapped_column(Text, default="")
    emoji: Mapped[str | None] = mapped_column(String(16))
    default_model: Mapped[str | None] = mapped_column(String(255))
    # A model configuration as JSON: model, thinking, max_tokens, temperature (each optional).
    default_model_config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    permissions: Mapped[dict[str, Any]] = mapped_column(default=dict)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default=AgentStatus.ACTIVE)
    created_at: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)


class Capability(Base):
    """A bundle of tools and prompt additions an agent can be given."""

    __tablename__ = "capabilities"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="available")
    icon: Mapped[str | None] = mapped_column(String(64))
    category: Mapped[str | None] = mapped_column(String(64))


class AgentCapability(Base):
    """Which capabilities an agent has, applied in `position` order."""

    __tablename__ = "agent_capabilities"
    __table_args__ = (UniqueConstraint("agent_id", "capability_id"),)

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    capability_id: Mapped[str] = mapped_column(ForeignKey("capabilities.id"))
    position: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[int] = mapped_column(Millis)
