"""A Gmail mailbox read through its history: each new message stored once, the watermark
moved only after the messages up to it are stored.

A push from Gmail (through Cloud Pub/Sub) says only "the mailbox changed". The push is
recorded and rings `mailbox_changed`; a worker then runs `sync_mailbox`, which lists the
history after the stored watermark, fetches each added message and stores it under
`gmail:<message id>` (a redelivered push or an overlapping history stores nothing twice).
Two syncs may run at once (two pushes, or a push and the timer): both store the same
events once, and the watermark only ever moves forward, so neither loses what the other
listed. A history id Gmail no longer knows (404, after about a week) falls back to the
recent INBOX messages, bounded in number and dated after the last sync.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.event import NexusEvent
from nexus.ingest.service import Ingested, ingest

# A re-sync reads mail received from this long before the last sync: Gmail's receipt time
# and our clock need not agree, and what is read twice is stored once anyway.
RESYNC_OVERLAP_S = 3600


class GmailError(Exception):
    """Gmail could not be asked (not configured, refused, or unreachable). The message
    names what to fix and never holds a token."""


class HistoryExpired(GmailError):
    """The start history id is older than Gmail keeps (its 404)."""


@dataclass(frozen=True)
class HistoryPage:
    """One page of `users.history.list`: the messages added, in history order."""

    message_ids: tuple[str, ...]
    history_id: int  # the mailbox's current history id when the page was read
    next_page: str | None


@dataclass(frozen=True)
class Watch:
    """What `users.watch` answered: the history id it starts at, and when it lapses."""

    history_id: int
    expires_at: int  # Unix ms


class GmailMailbox(Protocol):
    """One mailbox over the Gmail API (nexus/adapters/gmail_api.py)."""

    address: str  # the mailbox's own address, lower case

    def history(self, start: int, page: str | None = None) -> HistoryPage:
        """Messages added after `start`; HistoryExpired when Gmail no longer has it."""
        ...

    def message(self, message_id: str) -> NexusEvent | None:
        """The message as an event (`gmail:<id>`); None when it is gone from the mailbox."""
        ...

    def recent(self, *, after_s: int | None, limit: int) -> list[str]:
        """Ids of the newest INBOX messages (received after `after_s`), newest first."""
        ...

    def current_history_id(self) -> int: ...

    def watch(self, topic: str) -> Watch: ...


@dataclass(frozen=True)
class Synced:
    stored: tuple[str, ...]  # event ids stored by this sync (not those stored before)
    history_id: int  # the watermark this sync reached
    resynced: bool = False  # the history was too old: recent messages were read instead
    started: bool = False  # the mailbox had no watermark: this sync only set one


def event_id_of(message_id: str) -> str:
    """The deterministic event id of a Gmail message."""
    return f"gmail:{message_id}"


def record_push(
    uow: UnitOfWork, events: Sequence[NexusEvent], doorbell: Doorbell, *, mailbox: str | None
) -> list[Ingested]:
    """Store a push (its record, never a turn) and ring the mailbox's sync after commit.
    A push redelivered rings again: a sync has nothing to lose by running twice."""
    results = ingest(uow, events, doorbell)
    if mailbox is not None and any(_names(event, mailbox) for event in events):
        uow.after_commit(partial(doorbell.mailbox_changed, mailbox))
    return results


def _names(event: NexusEvent, mailbox: str) -> bool:
    address = event.raw.get("email_address") if isinstance(event.raw, dict) else None
    return isinstance(address, str) and address.lower() == mailbox.lower()


def sync_mailbox(
    database: Database,
    gmail: GmailMailbox,
    doorbell: Doorbell,
    *,
    resync_limit: int,
) -> Synced:
    """Store every message added since the watermark, then move the watermark."""
    mailbox = gmail.address
    with database.reading() as uow:
        state = uow.ledger.gmail.get(mailbox)
    if state is None or state.history_id is None:
        # Never synced: start from now. Mail from before Nexus watched is not answered.
        current = gmail.current_history_id()
        with database.unit_of_work() as uow:
            uow.ledger.gmail.start(mailbox, current)
            uow.commit()
        return Synced(stored=(), history_id=current, started=True)
    try:
        message_ids, reached = _history_since(gmail, state.history_id)
        resynced = False
    except HistoryExpired:
        # Read the current id before listing: whatever arrives meanwhile is in the history
        # after it as well, and stored once.
        reached = gmail.current_history_id()
        after_s = state.synced_at // 1000 - RESYNC_OVERLAP_S if state.synced_at else None
        message_ids = list(reversed(gmail.recent(after_s=after_s, limit=resync_limit)))
        resynced = True
    stored = _store_messages(database, gmail, doorbell, message_ids)
    with database.unit_of_work() as uow:
        uow.ledger.gmail.advance(mailbox, reached)
        uow.commit()
    return Synced(stored=tuple(stored), history_id=reached, resynced=resynced)


def _history_since(gmail: GmailMailbox, start: int) -> tuple[list[str], int]:
    """Every message added after `start` (each once, oldest first), and the history id
    the listing reached."""
    seen: dict[str, None] = {}
    reached, page = start, None
    while True:
        found = gmail.history(start, page)
        seen.update(dict.fromkeys(found.message_ids))
        reached = max(reached, found.history_id)
        page = found.next_page
        if not page:
            return list(seen), reached


def _store_messages(
    database: Database, gmail: GmailMailbox, doorbell: Doorbell, message_ids: Iterable[str]
) -> list[str]:
    """Fetch and store each message not stored yet, each in its own transaction: a failure
    part way keeps what was stored, and the retry fetches only the rest."""
    stored: list[str] = []
    for message_id in message_ids:
        with database.reading() as uow:
            known = uow.ledger.events.get(event_id_of(message_id)) is not None
        if known:
            continue
        event = gmail.message(message_id)
        if event is None:
            continue  # deleted before we read it: nothing to answer
        with database.unit_of_work() as uow:
            results = ingest(uow, [event], doorbell)
            uow.commit()
        stored.extend(result.event_id for result in results if result.stored)
    return stored
