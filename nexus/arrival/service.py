"""The one way in: every input is queued for its session here, under one set of rules.

A platform's message routed by the router, a message sent through the API or the CLI, a
routed one (`POST /v1/route`), a hook's firing, an agent's post or dispatch, a worker's
result, a merge notice, a compaction asked for: each becomes a queue item through
`queue_for`, which refuses an archived session, holds the session's row lock, applies the
cap and drop policy the input arrived under, tells a running turn (interrupt, steer) with
the epoch read under that lock, and announces `queue.item.queued` (and what the cap
dropped) on the session's stream, after commit. `tests/unit/test_one_way_in.py` fails if
any other module inserts queue items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from nexus.arrival.settings import Arrival, archived_reason
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.query import QueryMessage
from nexus.engine.stream_events import QUEUE_ITEM_DROPPED, QUEUE_ITEM_QUEUED, StreamEvent
from nexus.ledger.enums import MessageSource, QueueMode, SessionStatus
from nexus.ledger.records import EventRecord, NewQueueItem, QueueItemRecord, SessionRecord
from nexus.ledger.repository import SessionArchived, SessionDeleted
from nexus.queueing.modes import arrival_action
from nexus.queueing.overflow import SUMMARY_PENDING, Overflow, drop_over_cap
from nexus.queueing.settings import item_payload

QUEUED, DENIED = "queued", "denied"


class ArrivalSignals(Protocol):
    """How an arriving message reaches a turn already running, and the session's stream
    (the coordination port)."""

    def request_abort(self, session_id: str, *, epoch: int) -> None: ...

    def steer(self, session_id: str, message: QueryMessage, *, epoch: int) -> None: ...

    def publish_many(self, events: Sequence[StreamEvent]) -> None: ...


@dataclass(frozen=True)
class Queued:
    """The items queued (one per arrival, in order; an input queued before keeps its item),
    and the one item when it is all the session has open (`Enqueued.alone`)."""

    item_ids: tuple[str, ...]
    alone: QueueItemRecord | None = None


def refuse_archived(session: SessionRecord) -> None:
    """An archived session (a cancelled worker included) takes no input: SessionArchived,
    whose message is the disposition a refused event records."""
    if session.status == SessionStatus.DELETED:
        raise SessionDeleted(archived_reason(session))
    if session.status != SessionStatus.ACTIVE:
        raise SessionArchived(archived_reason(session))


def queue_for(
    uow: UnitOfWork,
    session: SessionRecord,
    arrivals: Sequence[Arrival],
    *,
    signals: ArrivalSignals | None,
    doorbell: Doorbell | None,
    locked: bool = False,
    settle: Sequence[tuple[str, str, str | None]] = (),
) -> Queued:
    """Queue `arrivals` for `session` (each input once), in the caller's transaction; the
    caller commits. Raises SessionArchived for an archived session, changing nothing.

    One row lock (none when `locked`: the caller took it, reading `session` under it), one
    cap decision (under the settings the first arrival came with, counted with the last
    enqueue), and at most one abort signal however many interrupting messages came.
    After commit: the signals and the stream's announcement (`signals`), then the
    session's doorbell (`doorbell`; None when the caller rings or runs the session
    itself). `settle`: what became of a router batch's events, written by the last
    enqueue."""
    refuse_archived(session)
    # The epoch the signals carry: read under the session's lock (or by the caller under
    # it), so a turn claimed after this transaction obeys none of them.
    epoch = session.epoch if locked else uow.ledger.sessions.lock(session.id)
    item_ids: list[str] = []
    queued: list[tuple[str, EventRecord | None, QueueMode]] = []
    abort = False
    waiting: int | None = None
    alone: QueueItemRecord | None = None
    for position, came in enumerate(arrivals):
        item = queue_item(session, came)
        if position == len(arrivals) - 1:
            item_id, created, waiting, alone = uow.ledger.queue.enqueue_counting(
                item, summary_marker=SUMMARY_PENDING, settle=settle
            )
        else:
            item_id, created = uow.ledger.queue.enqueue(item)
        item_ids.append(item_id)
        if not created:
            continue
        queued.append((item_id, came.event, came.mode))
        action = arrival_action(came.mode)
        if signals is not None and action == "abort":
            abort = True
        elif signals is not None and action == "steer" and came.event is not None:
            message = steer_message(came.event, item_id, came.mode)
            uow.after_commit(partial(signals.steer, session.id, message, epoch=epoch))
    limits = arrivals[0].settings
    dropped = drop_over_cap(
        uow, session.id, cap=limits.cap.value, policy=limits.drop.value, waiting=waiting
    )
    if signals is not None:
        if abort:  # first: a running turn stops sooner
            uow.after_commit(partial(signals.request_abort, session.id, epoch=epoch))
        _announce(uow, signals, session.id, queued, dropped)
    if doorbell is not None and queued:
        uow.after_commit(partial(doorbell.session_has_work, session.id))
    # What the cap dropped is no longer the item alone (and it owes a summary now).
    only = alone if len(arrivals) == 1 and not dropped.item_ids else None
    return Queued(tuple(item_ids), only)


def queue_item(session: SessionRecord, came: Arrival) -> NewQueueItem:
    return NewQueueItem(
        session_id=session.id,
        event_id=came.event.id if came.event is not None else None,
        mode=came.mode,
        source=came.sent_by,
        payload={**item_payload(came.settings), **came.payload},
    )


def steer_message(event: EventRecord, item_id: str, mode: QueueMode) -> QueryMessage:
    """The message a running turn takes in at its next boundary (steer, steer-backlog)."""
    return QueryMessage(
        text=event.text or "",
        source=event.source or MessageSource.HUMAN,
        event_id=event.id,
        queue_item_id=item_id,
        platform=event.platform,
        sender_name=event.sender_name,
        sender_id=event.sender_id,
        occurred_at=event.occurred_at,
        attachments=event.attachments,
        extends_answer=mode == QueueMode.STEER,
        model_overrides=event.model_overrides,
    )


def _announce(
    uow: UnitOfWork,
    signals: ArrivalSignals,
    session_id: str,
    queued: Sequence[tuple[str, EventRecord | None, QueueMode]],
    dropped: Overflow,
) -> None:
    """After commit, tell the session's stream what its queue gained and lost: one publish
    for the whole batch (`queue.item.queued`, `queue.item.dropped`)."""
    events = [
        StreamEvent(
            session_id,
            QUEUE_ITEM_QUEUED,
            {
                "queue_item_id": item_id,
                "event_id": event.id if event is not None else None,
                "mode": mode.value,
            },
        )
        for item_id, event, mode in queued
    ]
    events.extend(
        StreamEvent(
            session_id,
            QUEUE_ITEM_DROPPED,
            {"queue_item_id": item_id, "disposition": "dropped", "reason": dropped.reason},
        )
        for item_id in dropped.item_ids
    )
    if events:
        uow.after_commit(partial(signals.publish_many, events))
