"""The watchdog: sessions whose claimed work no live run holds, or whose due queued work
waited a whole grace with no run, are rung; no others."""

from __future__ import annotations

from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import QueueMode
from nexus.ledger.records import NewQueueItem, NewSession, OpenWork
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.watchdog import orphaned_sessions, ring_orphaned, stranded


def _session_with_item(
    database: Database, label: str, *, claimed: bool, available_at: int | None = None
) -> str:
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("atlas")
        session = uow.ledger.sessions.ensure(NewSession(label=label, persona_id=persona.id))
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(
                session_id=session.id,
                mode=QueueMode.QUEUE,
                payload={"text": label},
                available_at=available_at,
            )
        )
        if claimed:
            epoch = uow.ledger.sessions.claim(session.id)
            uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=600_000)
        uow.commit()
    return session.id


# -- what is stranded: rows and a clock ----------------------------------------------------


def test_claimed_work_is_stranded_however_fresh() -> None:
    rows = [OpenWork(session_id="s1", claimed=True, due_at=None)]
    assert stranded(rows, now_ms=1_000, grace_ms=5_000) == ["s1"]


def test_queued_work_is_stranded_once_due_for_the_whole_grace() -> None:
    rows = [
        OpenWork(session_id="fresh", claimed=False, due_at=9_000),
        OpenWork(session_id="edge", claimed=False, due_at=5_000),
        OpenWork(session_id="old", claimed=False, due_at=1_000),
        OpenWork(session_id="nothing due", claimed=False, due_at=None),
    ]
    assert stranded(rows, now_ms=10_000, grace_ms=5_000) == ["edge", "old"]
    assert stranded(rows, now_ms=10_000, grace_ms=0) == ["fresh", "edge", "old"]


def test_with_a_backlog_only_claimed_work_is_stranded() -> None:
    """Session runs waiting in the broker: overdue queued work waits its turn (ringing it
    again would put empty runs ahead of real ones); a claim without a lease is still a run
    that died."""
    rows = [
        OpenWork(session_id="waiting", claimed=False, due_at=1_000),
        OpenWork(session_id="dead run", claimed=True, due_at=None),
    ]
    assert stranded(rows, now_ms=10_000, grace_ms=5_000, backlog=True) == ["dead run"]
    assert stranded(rows, now_ms=10_000, grace_ms=5_000) == ["waiting", "dead run"]


# -- on the ledger -------------------------------------------------------------------------


def test_claimed_work_without_a_live_lease_is_rung_once_per_look(database: Database) -> None:
    leases = InProcessCoordination()
    dead = _session_with_item(database, "dm:dead", claimed=True)
    alive = _session_with_item(database, "dm:alive", claimed=True)
    _session_with_item(database, "dm:waiting", claimed=False)  # fresh: the doorbell's business
    held = leases.acquire(f"session:{alive}", 60_000)
    assert held is not None
    assert orphaned_sessions(database, leases, grace_ms=5_000) == [dead]
    doorbell = RecordingDoorbell()
    assert ring_orphaned(database, leases, doorbell, grace_ms=5_000) == ([dead], [])
    assert doorbell.sessions == [dead]
    held.release()  # the live run ends without settling: now it is orphaned too
    assert sorted(orphaned_sessions(database, leases, grace_ms=5_000)) == sorted([dead, alive])


def test_overdue_queued_work_without_a_live_lease_is_rung(database: Database) -> None:
    """A run cut off from Redis put its turn back with a backoff and could not ring for the
    retry: once the retry is due for a grace and no run holds the lease, it is rung."""
    with database.reading() as uow:
        now = uow.ledger.clock()
    stranded_id = _session_with_item(database, "dm:stranded", claimed=False)
    running = _session_with_item(database, "dm:running", claimed=False)
    _session_with_item(database, "dm:later", claimed=False, available_at=now + 60_000)
    leases = InProcessCoordination()
    held = leases.acquire(f"session:{running}", 60_000)
    assert held is not None
    later = lambda: now + 10_000  # noqa: E731
    assert orphaned_sessions(database, leases, grace_ms=5_000, clock=later) == [stranded_id]
    doorbell = RecordingDoorbell()
    rung = ring_orphaned(database, leases, doorbell, grace_ms=5_000, clock=later)
    assert rung.dead_runs == [] and rung.overdue == [stranded_id]
    assert doorbell.sessions == [stranded_id]


def test_one_watchdog_rings_an_overdue_session_per_grace(database: Database) -> None:
    """Every worker runs a watchdog: the first to ring a session raises a flag that keeps
    the others (and itself) from ringing it again until the grace has passed."""
    with database.reading() as uow:
        now = uow.ledger.clock()
    session = _session_with_item(database, "dm:backlog", claimed=False)
    shared = InProcessCoordination()
    first, second = RecordingDoorbell(), RecordingDoorbell()
    later = lambda: now + 10_000  # noqa: E731
    assert ring_orphaned(database, shared, first, grace_ms=5_000, clock=later).sessions == [session]
    assert ring_orphaned(database, shared, second, grace_ms=5_000, clock=later).sessions == []
    assert first.sessions == [session] and second.sessions == []
