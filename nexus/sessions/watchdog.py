"""Runs that died: sessions with claimed work and no live lease, found without the timer."""

from __future__ import annotations

from typing import Protocol

from nexus.db import Database
from nexus.doorbell import Doorbell


class Leases(Protocol):
    def lease_held(self, name: str) -> bool: ...


def orphaned_sessions(database: Database, leases: Leases) -> list[str]:
    """Sessions whose claimed items no run holds a lease for. The holder takes the lease
    before it claims and releases it after it settles, so claims without a lease belong to
    a run that died (kill -9, a lost host) or lost its lease (Redis flushed)."""
    with database.unit_of_work() as uow:
        claimed = uow.ledger.queue.sessions_with_claims()
    return [session_id for session_id in claimed if not leases.lease_held(f"session:{session_id}")]


def ring_orphaned(database: Database, leases: Leases, doorbell: Doorbell) -> list[str]:
    """Ring every orphaned session: its next run reclaims the dead run's items (recording
    the lost attempt) and answers them, a lease TTL after the death rather than a timer
    tick or a broker redelivery (~21 minutes) later."""
    orphans = orphaned_sessions(database, leases)
    for session_id in orphans:
        doorbell.session_has_work(session_id)
    return orphans
