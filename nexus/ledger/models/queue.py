"""The durable per-session queue: each input waits here until it has a disposition."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.enums import Disposition, QueueMode, QueueStatus
from nexus.ledger.models.base import Base, Millis, one_of


class QueueItem(Base):
    """An input routed to a session, from `queued` to exactly one final disposition."""

    __tablename__ = "queue_items"
    __table_args__ = (
        one_of("mode", QueueMode),
        one_of("status", QueueStatus),
        one_of("disposition", Disposition),
        # Routing the same event to the same session twice yields one item (idempotent).
        UniqueConstraint("session_id", "event_id"),
        Index("ix_queue_items_session_id_status_priority", "session_id", "status", "priority"),
        Index("ix_queue_items_status_claim_expires_at", "status", "claim_expires_at"),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    event_id: Mapped[str | None] = mapped_column(ForeignKey("events.id"))
    mode: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    source: Mapped[str | None] = mapped_column(String(16))
    # Inputs that are not platform events (a hook's prompt, a worker result) carry their text
    # and context here.
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), default=QueueStatus.QUEUED)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_epoch: Mapped[int | None] = mapped_column(BigInteger)
    claim_expires_at: Mapped[int | None] = mapped_column(Millis)
    available_at: Mapped[int] = mapped_column(Millis)
    disposition: Mapped[str | None] = mapped_column(String(16))
    disposition_detail: Mapped[str | None] = mapped_column(Text)
    consumed_by_turn_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id"))
    enqueued_at: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)
