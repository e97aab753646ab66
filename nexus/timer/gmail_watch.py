"""Gmail's `users.watch` lapses after seven days: the timer renews it a day before.

The decision is pure (`watch_due`); `renew_watch` asks Gmail only when it is due, and
records the new expiry (and, for a mailbox never synced, the history id to start from).
"""

from __future__ import annotations

from nexus.db import Database
from nexus.ingest.gmail import GmailMailbox, Watch

DAY_MS = 24 * 60 * 60 * 1000
RENEW_BEFORE_MS = DAY_MS  # Gmail asks for a renewal at least every 7 days; daily is the advice


def watch_due(expires_at: int | None, now_ms: int, *, before_ms: int = RENEW_BEFORE_MS) -> bool:
    """True when there is no watch on record, or it lapses within `before_ms`."""
    return expires_at is None or expires_at - now_ms < before_ms


def renew_watch(
    database: Database, gmail: GmailMailbox, *, topic: str, now_ms: int
) -> Watch | None:
    """Renew the mailbox's watch if it is due; the watch made, or None when not due."""
    with database.reading() as uow:
        state = uow.ledger.gmail.get(gmail.address)
    if not watch_due(state.watch_expires_at if state else None, now_ms):
        return None
    watch = gmail.watch(topic)
    with database.unit_of_work() as uow:
        uow.ledger.gmail.watched(gmail.address, watch.expires_at)
        # Only a first start: a watermark already set must not jump past unread mail.
        uow.ledger.gmail.start(gmail.address, watch.history_id)
        uow.commit()
    return watch
