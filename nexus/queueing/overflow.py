"""Queue overflow: drop per the cap policy, give each dropped item its disposition, and
record the notice its sender is owed (an outbound event the delivery layer sends)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.db import UnitOfWork
from nexus.ledger.enums import Disposition, QueueStatus
from nexus.ledger.records import EventDraft, EventRecord, QueueItemRecord
from nexus.queueing.caps import DropPolicy, over_cap

NOTICE = "notice"
SUMMARY_PENDING = "; summary pending"
_PREVIEW = 80


@dataclass(frozen=True)
class Overflow:
    """What a cap check dropped (nothing, usually) and why."""

    item_ids: tuple[str, ...] = ()
    reason: str = ""


def drop_over_cap(
    uow: UnitOfWork,
    session_id: str,
    *,
    cap: int,
    policy: DropPolicy,
    waiting: int | None = None,
) -> Overflow:
    """Drop what is over the cap; returns what was dropped. The caller holds the session's
    lock (`sessions.lock`), so routers count the queue one at a time. The count is its own
    statement, after the lock: on Postgres a statement that waited for the lock still reads
    as of when it started, and would miss what the router it waited for queued. `waiting`
    is that count when the caller took it already, with its enqueue (`enqueue_counting`).
    Almost always under the cap: a count says so, and the items are read only past it."""
    if waiting is None and cap > 0:
        waiting = uow.ledger.queue.count_queued(session_id)
    if cap <= 0 or waiting is None or waiting <= cap:
        return Overflow()
    queued = uow.ledger.queue.for_session(session_id, statuses=[QueueStatus.QUEUED])
    decision = over_cap(queued, cap=cap, policy=policy)
    if not decision.dropped:
        return Overflow()
    detail = f"queue cap {cap} reached (policy {policy})"
    if decision.one_notice:
        # One notice and one summary for the whole overflow, written when the session next
        # runs (summarize_overflow), so a burst of drops is told once, not once per drop.
        detail += SUMMARY_PENDING
    uow.ledger.queue.dispose(
        [item.id for item in decision.dropped],
        status=QueueStatus.DROPPED,
        disposition=Disposition.DROPPED,
        detail=detail,
        only_waiting=True,  # a run may have claimed one since we looked
    )
    if not decision.one_notice:
        for item in decision.dropped:
            event = _event(uow, item)
            text = f"Your message was not answered because too many were waiting (limit {cap})."
            _notice(uow, f"notice:dropped:{item.id}", event, f"{text} It said: {_preview(event)}")
    return Overflow(tuple(item.id for item in decision.dropped), detail)


def summarize_overflow(
    uow: UnitOfWork,
    session_id: str,
    *,
    pending: Sequence[tuple[QueueItemRecord, EventRecord | None]] | None = None,
) -> str | None:
    """For drops under `summarize` not yet told: one notice to the sender, and the summary
    text the next turn reads (None when nothing is pending). `pending`: those drops with
    their events, when the caller read them already (the session run does)."""
    if pending is None:
        dropped = uow.ledger.queue.dropped_pending_summary(session_id, marker=SUMMARY_PENDING)
        pending = [(item, _event(uow, item)) for item in dropped]
    if not pending:
        return None
    items = [item for item, _ in pending]
    events = [event for _, event in pending]
    said = "\n".join(f"- {_preview(event)}" for event in events if event is not None)
    notice = (
        f"{len(items)} of your earlier messages were not answered one by one because too "
        f"many were waiting. I have their gist:\n{said}"
    )
    _notice(uow, f"notice:overflow:{items[-1].id}", events[-1], notice)
    uow.ledger.queue.mark_summarized([item.id for item in items], marker=SUMMARY_PENDING)
    return (
        f"[{len(items)} earlier messages were dropped because the queue was full. "
        f"They said:\n{said}]"
    )


def _event(uow: UnitOfWork, item: QueueItemRecord) -> EventRecord | None:
    return uow.ledger.events.get(item.event_id) if item.event_id else None


def _preview(event: EventRecord | None) -> str:
    text = (event.text or "") if event is not None else ""
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _notice(uow: UnitOfWork, notice_id: str, about: EventRecord | None, text: str) -> None:
    """An outbound event addressed to where `about` came from; stored, never routed."""
    uow.ledger.events.insert(
        EventDraft(
            id=notice_id,
            adapter=about.adapter if about else "nexus",
            platform=about.platform if about else "nexus",
            kind=NOTICE,
            direction="outbound",
            space=about.space if about else None,
            container_kind=about.container_kind if about else None,
            container_id=about.container_id if about else None,
            platform_thread_id=about.platform_thread_id if about else None,
            reply_to=about.message_id if about else None,
            text=text,
            occurred_at=uow.ledger.clock(),
        )
    )
    uow.ledger.events.mark_processed(notice_id, NOTICE, "queue overflow notice")
