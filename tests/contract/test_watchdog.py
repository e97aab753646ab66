"""The watchdog: sessions whose claimed work no live run holds are rung, no others."""

from __future__ import annotations

from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import QueueMode
from nexus.ledger.records import NewQueueItem, NewSession
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.watchdog import orphaned_sessions, ring_orphaned


def _session_with_item(database: Database, label: str, *, claimed: bool) -> str:
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        session = uow.ledger.sessions.ensure(NewSession(label=label, persona_id=persona.id))
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, payload={"text": label})
        )
        if claimed:
            epoch = uow.ledger.sessions.claim(session.id)
            uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=600_000)
        uow.commit()
    return session.id


def test_claimed_work_without_a_live_lease_is_rung_once_per_look(database: Database) -> None:
    leases = InProcessCoordination()
    dead = _session_with_item(database, "dm:dead", claimed=True)
    alive = _session_with_item(database, "dm:alive", claimed=True)
    _session_with_item(database, "dm:waiting", claimed=False)  # the doorbell's business
    held = leases.acquire(f"session:{alive}", 60_000)
    assert held is not None
    assert orphaned_sessions(database, leases) == [dead]
    doorbell = RecordingDoorbell()
    assert ring_orphaned(database, leases, doorbell) == [dead]
    assert doorbell.sessions == [dead]
    held.release()  # the live run ends without settling: now it is orphaned too
    assert sorted(orphaned_sessions(database, leases)) == sorted([dead, alive])
