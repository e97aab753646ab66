"""One tick: emit a timer event for every minute due since the watermark, then advance it.

Catch-up rule: a tick emits every minute in (watermark, now], oldest first, so a beat that
was down for three minutes fires each of those minutes once on its return; after more than
an hour down only the newest 60 minutes are replayed (the rest are logged as skipped).
Two beats ticking at once serialise on the watermark row: the second finds it advanced
and emits nothing. Timer event ids are deterministic (`timer:<minute>`), so even a replay
cannot store a minute twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.hooks.cron import minutes_to_tick
from nexus.ledger.enums import MessageSource
from nexus.ledger.records import EventDraft

TIMER = "timer"
WATERMARK = "default"


@dataclass(frozen=True)
class Ticked:
    minutes: tuple[int, ...]
    skipped: int


def timer_event_id(minute_ms: int) -> str:
    stamp = datetime.fromtimestamp(minute_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")
    return f"timer:{stamp}"


def tick(uow: UnitOfWork, doorbell: Doorbell, *, now_ms: int) -> Ticked:
    """In the caller's unit of work; the doorbells ring once it commits."""
    last = uow.ledger.timer.lock_watermark(WATERMARK)
    minutes, skipped = minutes_to_tick(last, now_ms)
    for minute in minutes:
        event_id = timer_event_id(minute)
        stored = uow.ledger.events.insert(
            EventDraft(
                id=event_id,
                adapter=TIMER,
                platform=TIMER,
                kind=TIMER,
                source=MessageSource.CRON,
                occurred_at=minute,
                payload={"minute": minute},
            )
        )
        if stored:
            # Not a message for any session: it exists for hooks (and the record).
            uow.ledger.events.mark_processed(event_id, TIMER, None)
            uow.after_commit(partial(doorbell.hooks_due, event_id))
    if minutes:
        uow.ledger.timer.advance(WATERMARK, minutes[-1])
    return Ticked(minutes=tuple(minutes), skipped=skipped)
