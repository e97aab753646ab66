"""A session's stream events, kept: what the SSE stream sent for each committed turn."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.models.base import Base, Millis


class SessionEvent(Base):
    """One stream event, append-only: rows are inserted with their turn's commit and never
    updated or deleted. `sequence` counts a session's events from 1, without gaps; a turn's
    events are consecutive and in the order they were published (docs/operations.md, "Session
    events")."""

    __tablename__ = "session_events"
    __table_args__ = (
        # The per-session order, and what makes two writers of one sequence fail loudly.
        Index("uq_session_events_session_id_sequence", "session_id", "sequence", unique=True),
        Index("ix_session_events_turn_id", "turn_id"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    sequence: Mapped[int] = mapped_column(BigInteger)
    type: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]]
    # The turn whose commit wrote it (every row has one today; kept nullable so events of
    # other kinds can join later without a migration).
    turn_id: Mapped[str | None] = mapped_column(String(26))
    created_at: Mapped[int] = mapped_column(Millis)
