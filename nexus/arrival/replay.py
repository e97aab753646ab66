"""Replaying a dead letter: its input back in its session's queue, as a new item.

The ledger only moves a queue item's status forward, so the dead item keeps its status and
disposition (`dead`, `dead_lettered`, and why) for the record. Its replay is a new queued
item of the same session with the same payload, saying which item it replays
(`payload.replay_of`). An item that came from an event gets a copy of that event under the
id `replay:<dead item>` (a session queues one event once, and the copy keeps the reply's
address: the answer goes where the original would have gone). Replaying one dead letter
twice finds the first replay and queues nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

from nexus.arrival.service import ArrivalSignals, queue_for
from nexus.arrival.settings import SHIPPED_QUEUE_POLICY, QueuePolicy, arrival
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import QueueMode, SessionStatus, TaskStatus
from nexus.ledger.records import EventDraft
from nexus.ledger.repository import NotFound, SessionArchived
from nexus.ledger.repository.dead_letters import REPLAY_OF

REPLAY_EVENT_PREFIX = "replay:"
# The event copy is stored settled, as a routed event is: no router needs to see it.
REPLAY_EVENT_DISPOSITION = "queued"


@dataclass(frozen=True)
class Replayed:
    dead_id: str
    queue_item_id: str
    session_id: str
    session: str
    event_id: str | None
    created: bool  # False: it had been replayed before, as `queue_item_id`


def replay(
    uow: UnitOfWork,
    dead_id: str,
    doorbell: Doorbell,
    *,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy = SHIPPED_QUEUE_POLICY,
) -> Replayed:
    """Queue the dead item `dead_id` again in its session, through the one way in, in the
    caller's unit of work; the session's doorbell rings once it commits. NotFound when no
    item of that id is dead; SessionArchived, writing nothing, when its session takes no
    new work."""
    ledger = uow.ledger
    dead = ledger.dead_letters.lock(dead_id)
    if dead is None:
        raise NotFound(f"no dead-lettered queue item {dead_id!r}")
    session = ledger.sessions.get(dead.session_id)
    if session is None:  # a foreign key says otherwise; still, say what is wrong
        raise NotFound(f"the session of {dead_id!r} is gone")
    if session.status != SessionStatus.ACTIVE or session.task_status == TaskStatus.CANCELLED:
        raise SessionArchived(
            f"session {session.label!r} is {session.status}: it takes no new work, "
            f"so {dead_id} cannot be replayed (unarchive it first)"
        )
    earlier = ledger.dead_letters.replay_of(dead)
    if earlier is not None:
        item = ledger.queue.get(earlier)
        return Replayed(
            dead_id, earlier, session.id, session.label, item.event_id if item else None, False
        )
    event_id = None
    if dead.event_id is not None:
        original = ledger.events.get(dead.event_id)
        if original is None:
            raise NotFound(f"the event {dead.event_id!r} of {dead_id!r} is gone")
        event_id = f"{REPLAY_EVENT_PREFIX}{dead.id}"
        fields = original.model_dump(include=set(EventDraft.model_fields) - {"id", "payload"})
        ledger.events.insert(
            EventDraft(**fields, id=event_id, payload=ledger.events.payload_of(original.id)),
            disposition=REPLAY_EVENT_DISPOSITION,
            detail=f"replay of the dead-lettered item {dead.id} in session {session.label}",
        )
    event = ledger.events.get(event_id) if event_id is not None else None
    came = arrival(
        session,
        None,
        event,
        queueing,
        # In line like any new input: a replay interrupts or steers nothing.
        mode=QueueMode.QUEUE,
        source=dead.source,
        payload={**dead.payload, REPLAY_OF: dead.id},
    )
    queued = queue_for(uow, session, [came], signals=arrivals, doorbell=doorbell)
    item_id = queued.item_ids[0]
    return Replayed(dead_id, item_id, session.id, session.label, event_id, True)
