"""What a channel that reads a mailbox remembers between runs: Gmail's history watermark."""

from __future__ import annotations

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.models.base import Base, Millis


class GmailMailbox(Base):
    """One Gmail mailbox: the last history id whose messages are all stored, and when the
    `users.watch` that pushes its changes lapses."""

    __tablename__ = "gmail_mailboxes"

    mailbox: Mapped[str] = mapped_column(String(320), primary_key=True)
    # Gmail's history ids are uint64 in strings; real ones are far below 2**63.
    history_id: Mapped[int | None] = mapped_column(BigInteger)
    synced_at: Mapped[int | None] = mapped_column(Millis)
    watch_expires_at: Mapped[int | None] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)
