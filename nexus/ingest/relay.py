"""The relay: re-ring every doorbell the database says is still owed (invariant 1)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell, Flags

# An event younger than this is probably still on its first ring; leave it be.
DEFAULT_GRACE_MS = 5_000
# An event's hooks run after its routing and after the turn its router ran inline, which can
# take far longer than routing: an obligation younger than this is probably still on its way.
HOOKS_GRACE_MS = 30_000
# Obligations re-rung per look, oldest first: a backlog is worked off over several looks
# rather than flooding the broker at once.
HOOKS_PER_RELAY = 100
# The flag a relay raises for an obligation it re-rang: every worker's watchdog and the tick
# look, and one ring per obligation and grace period is enough (a queue already behind is
# not given more of the same work).
HOOKS_RELAYED = "hooks-relayed:"


@dataclass(frozen=True)
class Relayed:
    events: int
    sessions: int
    hooks: int = 0


def relay(
    uow: UnitOfWork,
    doorbell: Doorbell,
    *,
    grace_ms: int = DEFAULT_GRACE_MS,
    hooks_grace_ms: int = HOOKS_GRACE_MS,
    flags: Flags | None = None,
) -> Relayed:
    """Ring for unrouted events, for sessions with queued work, and for events whose hooks
    are still due. Rings are idempotent: the router, the session run and the hook run each
    tolerate a second ring for the same work."""
    now = uow.ledger.clock()
    events = uow.ledger.events.unprocessed(received_before=now - grace_ms)
    sessions = uow.ledger.queue.sessions_owed_a_run()
    for event_id in events:
        doorbell.event_received(event_id)
    for session_id in sessions:
        doorbell.session_has_work(session_id)
    hooks = relay_hooks(uow, doorbell, grace_ms=hooks_grace_ms, flags=flags)
    return Relayed(events=len(events), sessions=len(sessions), hooks=hooks)


def relay_hooks(
    uow: UnitOfWork,
    doorbell: Doorbell,
    *,
    grace_ms: int = HOOKS_GRACE_MS,
    flags: Flags | None = None,
) -> int:
    """Ring the hooks for events whose evaluation is still due `grace_ms` after they were
    stored (oldest first, at most `HOOKS_PER_RELAY`): their first ring was lost, or the run
    it started died. With `flags`, an obligation some relay re-rang within the last
    `grace_ms` is not rung again. Returns how many were rung."""
    owed = uow.ledger.events.hooks_owed(
        received_by=uow.ledger.clock() - grace_ms, limit=HOOKS_PER_RELAY
    )
    rung = 0
    for event_id in owed:
        if flags is None or flags.raise_flag(HOOKS_RELAYED + event_id, max(grace_ms, 1)):
            doorbell.hooks_due(event_id)
            rung += 1
    return rung
