"""Gmail mailboxes: the history watermark, only ever moved forward, and the watch's expiry."""

from __future__ import annotations

from sqlalchemy import Connection, or_, select, update

from nexus.ids import Clock
from nexus.ledger.records import MailboxRecord
from nexus.ledger.repository._sql import to_record, upsert_insert
from nexus.ledger.repository.tables import gmail_mailboxes


class GmailRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def get(self, mailbox: str) -> MailboxRecord | None:
        row = self._conn.execute(
            select(gmail_mailboxes).where(gmail_mailboxes.c.mailbox == mailbox)
        ).first()
        return to_record(MailboxRecord, row) if row is not None else None

    def _ensure(self, mailbox: str) -> None:
        self._conn.execute(
            upsert_insert(self._conn, gmail_mailboxes)
            .values(mailbox=mailbox, updated_at=self._clock())
            .on_conflict_do_nothing(index_elements=["mailbox"])
        )

    def advance(self, mailbox: str, history_id: int, *, synced: bool = True) -> bool:
        """Move the watermark to `history_id` unless it is there or beyond already (two
        syncs that overlap each move it at most to what they stored); True if it moved.
        `synced` also stamps the sync's time (not when a watch merely names a start)."""
        self._ensure(mailbox)
        now = self._clock()
        values: dict[str, int] = {"history_id": history_id, "updated_at": now}
        if synced:
            values["synced_at"] = now
        moved = self._conn.execute(
            update(gmail_mailboxes)
            .where(gmail_mailboxes.c.mailbox == mailbox)
            .where(
                or_(
                    gmail_mailboxes.c.history_id.is_(None),
                    gmail_mailboxes.c.history_id < history_id,
                )
            )
            .values(**values)
        )
        return moved.rowcount > 0

    def start(self, mailbox: str, history_id: int) -> bool:
        """Set the first watermark, if the mailbox has none yet; True if it was set."""
        self._ensure(mailbox)
        started = self._conn.execute(
            update(gmail_mailboxes)
            .where(gmail_mailboxes.c.mailbox == mailbox)
            .where(gmail_mailboxes.c.history_id.is_(None))
            .values(history_id=history_id, updated_at=self._clock())
        )
        return started.rowcount > 0

    def watched(self, mailbox: str, expires_at: int) -> None:
        """Record when the watch just made lapses."""
        self._ensure(mailbox)
        self._conn.execute(
            update(gmail_mailboxes)
            .where(gmail_mailboxes.c.mailbox == mailbox)
            .values(watch_expires_at=expires_at, updated_at=self._clock())
        )
