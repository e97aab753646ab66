"""Stranded sessions: due or claimed work that no live run holds, found without the timer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from nexus.db import Database
from nexus.doorbell import Doorbell
from nexus.ids import Clock
from nexus.ledger.records import OpenWork

# The flag one watchdog raises for a session it rang: the other workers' watchdogs (and its
# own next look) leave it be until the flag lapses, so a backlog is not rung N times.
WATCHDOG_RANG = "watchdog-rang:"


class Leases(Protocol):
    def lease_held(self, name: str) -> bool: ...

    def raise_flag(self, name: str, ttl_ms: int) -> bool: ...


def stranded(
    rows: Sequence[OpenWork], *, now_ms: int, grace_ms: int, backlog: bool = False
) -> list[str]:
    """The sessions to ring if no run holds their lease, in the order given.

    Claimed work: the holder takes the lease before it claims and releases it after it
    settles, so claims without a lease belong to a run that died (kill -9, a lost host) or
    lost its lease (Redis flushed, or its link to Redis cut).

    Queued work due at least `grace_ms` ago: its doorbell was lost. A run that could not
    reach Redis puts its turn back with a backoff and cannot ring for the retry; a fresher
    item is still the doorbell's business (its run is on its way). With a `backlog` (session
    runs wait in the broker for a worker), overdue queued work is waiting its turn, not
    lost: ringing it again would put empty runs ahead of real ones, and a deeper backlog
    makes more work overdue. It is rung once the backlog drains, if still no run took it."""
    return [
        row.session_id
        for row in rows
        if row.claimed
        or (not backlog and row.due_at is not None and row.due_at <= now_ms - grace_ms)
    ]


class Rung(NamedTuple):
    """The sessions one look rang: claimed work of a run that died or lost its lease
    (`dead_runs`), and queued work whose ring is overdue (`overdue`): lost, or still on
    its way to a busy worker that prefetched it, which the broker's queue does not show."""

    dead_runs: list[str]
    overdue: list[str]

    @property
    def sessions(self) -> list[str]:
        return [*self.dead_runs, *self.overdue]


def _orphans(
    database: Database,
    leases: Leases,
    *,
    grace_ms: int,
    clock: Clock | None,
    backlog: bool,
) -> list[OpenWork]:
    with database.reading() as uow:
        now = clock() if clock is not None else uow.ledger.clock()
        rows = uow.ledger.queue.open_work(now_ms=now)
    found = set(stranded(rows, now_ms=now, grace_ms=grace_ms, backlog=backlog))
    return [
        row
        for row in rows
        if row.session_id in found and not leases.lease_held(f"session:{row.session_id}")
    ]


def orphaned_sessions(
    database: Database,
    leases: Leases,
    *,
    grace_ms: int = 0,
    clock: Clock | None = None,
    backlog: bool = False,
) -> list[str]:
    """Stranded sessions (`stranded`) whose lease no run holds; by the ledger's clock
    unless `clock` is given."""
    orphans = _orphans(database, leases, grace_ms=grace_ms, clock=clock, backlog=backlog)
    return [row.session_id for row in orphans]


def ring_orphaned(
    database: Database,
    leases: Leases,
    doorbell: Doorbell,
    *,
    grace_ms: int = 0,
    clock: Clock | None = None,
    backlog: bool = False,
) -> Rung:
    """Ring every orphaned session: its next run reclaims a dead run's items (recording
    the lost attempt) and answers them, or takes the overdue queued work, a lease TTL after
    the loss rather than a timer tick or a broker redelivery (~21 minutes) later. A ring
    for a session another run took meanwhile is harmless: that run answers "busy", or
    finds nothing due. Each session is rung by one watchdog per `grace_ms` at most."""
    orphans = _orphans(database, leases, grace_ms=grace_ms, clock=clock, backlog=backlog)
    rung = Rung([], [])
    for row in orphans:
        if grace_ms <= 0 or leases.raise_flag(WATCHDOG_RANG + row.session_id, grace_ms):
            doorbell.session_has_work(row.session_id)
            (rung.dead_runs if row.claimed else rung.overdue).append(row.session_id)
    return rung
