"""The relay: re-ring every doorbell the database says is still owed (invariant 1)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell

# An event younger than this is probably still on its first ring; leave it be.
DEFAULT_GRACE_MS = 5_000


@dataclass(frozen=True)
class Relayed:
    events: int
    sessions: int


def relay(uow: UnitOfWork, doorbell: Doorbell, *, grace_ms: int = DEFAULT_GRACE_MS) -> Relayed:
    """Ring for unrouted events and for sessions with queued work. Rings are idempotent:
    the router and the session run each tolerate a second ring for the same work."""
    now = uow.ledger.clock()
    events = uow.ledger.events.unprocessed(received_before=now - grace_ms)
    sessions = uow.ledger.queue.sessions_owed_a_run()
    for event_id in events:
        doorbell.event_received(event_id)
    for session_id in sessions:
        doorbell.session_has_work(session_id)
    return Relayed(events=len(events), sessions=len(sessions))
