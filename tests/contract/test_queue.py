"""The durable queue: idempotent enqueue, ordered claims, release, dispositions, reaping."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import event as sql_event

from nexus.db import Database
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus
from nexus.ledger.records import EventDraft, NewQueueItem
from nexus.ledger.repository import Ledger
from nexus.ledger.repository.queue import Enqueued
from tests.support import FakeClock, build_chain, new_session


def _event(database: Database, event_id: str) -> None:
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(
            EventDraft(id=event_id, adapter="api", platform="api", occurred_at=0)
        )
        uow.commit()


def test_enqueue_is_idempotent_per_session_and_event(database: Database) -> None:
    _event(database, "api:1")
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        other = new_session(uow.ledger, "other")
        first = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, event_id="api:1", mode=QueueMode.QUEUE)
        )
        again = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, event_id="api:1", mode=QueueMode.QUEUE)
        )
        elsewhere = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=other.id, event_id="api:1", mode=QueueMode.QUEUE)
        )
        uow.commit()
    assert first[1] is True and again == (first[0], False)
    assert elsewhere[1] is True and elsewhere[0] != first[0]


def test_claims_follow_priority_then_arrival(database: Database, clock: FakeClock) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        ids = []
        for priority in (0, 0, 5, 0):
            clock.advance(1)
            item_id, _ = uow.ledger.queue.enqueue(
                NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, priority=priority)
            )
            ids.append(item_id)
        epoch = uow.ledger.sessions.claim(session.id)
        claimed = uow.ledger.queue.claim(session.id, epoch=epoch, lease_ms=1_000, limit=3)
        uow.commit()
    assert [c.id for c in claimed] == [ids[2], ids[0], ids[1]]
    assert all(c.status == QueueStatus.CLAIMED and c.attempts == 1 for c in claimed)
    assert all(c.claimed_epoch == epoch for c in claimed)


def test_items_not_yet_available_are_not_claimed(database: Database, clock: FakeClock) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        uow.ledger.queue.enqueue(
            NewQueueItem(
                session_id=session.id, mode=QueueMode.COLLECT, available_at=clock.now + 500
            )
        )
        assert uow.ledger.queue.claim(session.id, epoch=1, lease_ms=1_000) == []
        assert uow.ledger.queue.sessions_with_ready_work() == []
        clock.advance(500)
        assert uow.ledger.queue.sessions_with_ready_work() == [session.id]
        assert len(uow.ledger.queue.claim(session.id, epoch=1, lease_ms=1_000)) == 1


def test_release_only_returns_items_of_that_epoch(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE)
        )
        uow.ledger.queue.claim(session.id, epoch=7, lease_ms=1_000)
        assert uow.ledger.queue.release([item_id], epoch=6) == 0
        assert uow.ledger.queue.release([item_id], epoch=7) == 1
        item = uow.ledger.queue.get(item_id)
    assert item is not None and item.status == QueueStatus.QUEUED and item.attempts == 1


def test_dispose_sets_one_final_disposition(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE)
        )
        assert (
            uow.ledger.queue.dispose(
                [item_id],
                status=QueueStatus.DROPPED,
                disposition=Disposition.DROPPED,
                detail="queue cap 20 reached (policy old)",
            )
            == 1
        )
        # Already final: a second disposition does not overwrite the first.
        assert (
            uow.ledger.queue.dispose(
                [item_id], status=QueueStatus.DROPPED, disposition=Disposition.CANCELLED
            )
            == 0
        )
        with pytest.raises(ValueError, match="does not end"):
            uow.ledger.queue.dispose(
                [item_id], status=QueueStatus.DONE, disposition=Disposition.DROPPED
            )
        item = uow.ledger.queue.get(item_id)
        assert uow.ledger.queue.count_open(session.id) == 0
    assert item is not None
    assert (item.status, item.disposition) == (QueueStatus.DROPPED, Disposition.DROPPED)
    assert item.disposition_detail == "queue cap 20 reached (policy old)"


def test_reap_requeues_expired_claims_then_dead_letters(
    database: Database, clock: FakeClock
) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE)
        )
        outcomes = []
        for epoch in (1, 2, 3):
            assert len(uow.ledger.queue.claim(session.id, epoch=epoch, lease_ms=1_000)) == 1
            assert uow.ledger.queue.reap(max_attempts=3) == (0, 0)  # lease still running
            clock.advance(1_001)
            outcomes.append(uow.ledger.queue.reap(max_attempts=3))
        item = uow.ledger.queue.get(item_id)
    assert outcomes == [(1, 0), (1, 0), (0, 1)]
    assert item is not None
    assert (item.status, item.disposition) == (QueueStatus.DEAD, Disposition.DEAD_LETTERED)
    assert item.attempts == 3 and "3 attempts" in (item.disposition_detail or "")


def test_for_session_lists_in_queue_order_with_filters(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        a, _ = uow.ledger.queue.enqueue(NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE))
        b, _ = uow.ledger.queue.enqueue(NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE))
        uow.ledger.queue.claim(session.id, epoch=1, lease_ms=1_000)
        everything = uow.ledger.queue.for_session(session.id)
        waiting = uow.ledger.queue.for_session(session.id, statuses=[QueueStatus.QUEUED])
    assert [i.id for i in everything] == [a, b]
    assert [i.id for i in waiting] == [b]


def _queued(ledger: Ledger, session_id: str, count: int) -> list[str]:
    """`count` items queued for the session, in `queue` mode; their ids in order."""
    return [
        ledger.queue.enqueue(
            NewQueueItem(session_id=session_id, mode=QueueMode.QUEUE, payload={"n": n})
        )[0]
        for n in range(count)
    ]


def test_a_run_claims_its_items_under_a_new_epoch(database: Database) -> None:
    from nexus.ledger.repository import NotFound

    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        ids = _queued(uow.ledger, session.id, 3)
        before = uow.ledger.sessions.get(session.id)
        epoch, claimed = uow.ledger.queue.claim_for_run(
            session.id, [ids[2], ids[0]], lease_ms=1_000
        )
        # Taken already: nothing is claimed, and the epoch still moves on (a new run).
        again, none = uow.ledger.queue.claim_for_run(session.id, [ids[0]], lease_ms=1_000)
        after = uow.ledger.sessions.get(session.id)
        with pytest.raises(NotFound):
            uow.ledger.queue.claim_for_run("01NOSUCHSESSION00000000000", [ids[1]], lease_ms=1)
    assert before is not None and after is not None
    assert epoch == before.epoch + 1 and again == epoch + 1 == after.epoch
    assert [item.id for item in claimed] == [ids[2], ids[0]]  # in the order asked
    assert all(i.status == QueueStatus.CLAIMED and i.claimed_epoch == epoch for i in claimed)
    assert all(item.attempts == 1 for item in claimed) and none == []


def test_a_claim_reads_the_session_as_it_leaves_it(database: Database) -> None:
    """`snapshots.claim`: the run's claim and the snapshot its turn reads, together (one
    statement on Postgres): the same items and epoch as `queue.claim_for_run`, and the same
    snapshot as a read after the commit: the bumped epoch, the persona's capabilities in
    order, once each however many items were claimed, and the context at the head."""
    from nexus.ledger.repository import NotFound

    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        build_chain(uow.ledger, session, 3)
        uow.ledger.agents.set_capabilities(
            session.persona_id,
            [("web", "Web", "reads pages", "active"), ("code", "Code", "runs code", "active")],
        )
        ids = _queued(uow.ledger, session.id, 3)
        before = uow.ledger.sessions.get(session.id)
        epoch, claimed, read = uow.ledger.snapshots.claim(
            session.id, [ids[2], ids[0]], lease_ms=1_000
        )
        # Taken already: nothing is claimed, no snapshot, and the epoch still moves on.
        again, none, unread = uow.ledger.snapshots.claim(session.id, [ids[0]], lease_ms=1_000)
        with pytest.raises(NotFound):
            uow.ledger.snapshots.claim("01NOSUCHSESSION00000000000", [ids[1]], lease_ms=1)
        uow.commit()
    with database.reading() as uow:
        after = uow.ledger.snapshots.read(session.id)
    assert before is not None and read is not None
    assert epoch == before.epoch + 1 and again == epoch + 1 == after.session.epoch
    assert [item.id for item in claimed] == [ids[2], ids[0]]  # in the order asked
    assert all(i.status == QueueStatus.CLAIMED and i.claimed_epoch == epoch for i in claimed)
    assert all(item.attempts == 1 for item in claimed) and none == [] and unread is None
    assert read.session == after.session.model_copy(update={"epoch": epoch})
    assert read.persona == after.persona and read.capability_ids == ("web", "code")
    assert read.context == after.context and len(read.context.turns) == 3


def _writes() -> tuple[list[str], Callable[..., None]]:
    seen: list[str] = []

    def record(_conn: object, _cursor: object, sql: str, *_: object) -> None:
        if not sql.lstrip().upper().startswith("BEGIN"):
            seen.append(sql)

    return seen, record


def test_an_enqueue_counts_what_waits_with_it_in_one_statement(database: Database) -> None:
    """The cap's count rides with the enqueue: the new item, the session's other queued
    items, not its claimed ones nor another session's; a second enqueue of one event
    creates nothing and counts the same. One statement on Postgres."""
    for number in range(1, 4):
        _event(database, f"api:{number}")
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        other = new_session(uow.ledger, "other")
        uow.ledger.queue.enqueue(NewQueueItem(session_id=other.id, mode=QueueMode.QUEUE))
        claimed, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, event_id="api:1", mode=QueueMode.QUEUE)
        )
        epoch = uow.ledger.sessions.claim(session.id)
        uow.ledger.queue.claim_ids([claimed], epoch=epoch, lease_ms=1_000)
        uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, event_id="api:2", mode=QueueMode.QUEUE)
        )
        uow.commit()
    seen, record = _writes()
    sql_event.listen(database.engine, "before_cursor_execute", record)
    try:
        with database.unit_of_work() as uow:
            first = uow.ledger.queue.enqueue_counting(
                NewQueueItem(session_id=session.id, event_id="api:3", mode=QueueMode.QUEUE),
                summary_marker=MARKER,
            )
            uow.commit()
    finally:
        sql_event.remove(database.engine, "before_cursor_execute", record)
    with database.unit_of_work() as uow:
        again = uow.ledger.queue.enqueue_counting(
            NewQueueItem(session_id=session.id, event_id="api:3", mode=QueueMode.QUEUE),
            summary_marker=MARKER,
        )
        stored = uow.ledger.queue.get(first.item_id)
        uow.commit()
    assert first.created and first.waiting == 2  # api:2 and api:3; api:1 is claimed
    assert first.alone is None  # others wait, and one is claimed
    assert (again.item_id, again.created, again.waiting, again.alone) == (
        first.item_id,
        False,
        2,
        None,
    )
    assert stored is not None and stored.status == QueueStatus.QUEUED
    if database.dialect == "postgresql":
        assert len(seen) == 1, seen


MARKER = "; summary pending"


def test_an_enqueue_says_when_its_item_is_all_a_run_would_find(database: Database) -> None:
    """`alone` (Postgres) is the new item as stored when nothing else of its session is
    queued or claimed and no dropped item still owes its summary; otherwise None."""
    for number in range(1, 6):
        _event(database, f"api:{number}")

    def enqueue(session_id: str, event_id: str) -> Enqueued:
        with database.unit_of_work() as uow:
            found = uow.ledger.queue.enqueue_counting(
                NewQueueItem(session_id=session_id, event_id=event_id, mode=QueueMode.QUEUE),
                summary_marker=MARKER,
            )
            uow.commit()
        return found

    with database.unit_of_work() as uow:
        quiet, owing, busy = (new_session(uow.ledger, label) for label in ("a", "b", "c"))
        dropped, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=owing.id, mode=QueueMode.QUEUE)
        )
        uow.ledger.queue.dispose(
            [dropped],
            status=QueueStatus.DROPPED,
            disposition=Disposition.DROPPED,
            detail=f"queue cap 1 reached{MARKER}",
        )
        claimed, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=busy.id, mode=QueueMode.QUEUE)
        )
        epoch = uow.ledger.sessions.claim(busy.id)
        uow.ledger.queue.claim_ids([claimed], epoch=epoch, lease_ms=1_000)
        uow.commit()
    first = enqueue(quiet.id, "api:1")
    second = enqueue(quiet.id, "api:2")
    behind_drop = enqueue(owing.id, "api:3")
    behind_claim = enqueue(busy.id, "api:4")
    assert second.alone is None and behind_drop.alone is None and behind_claim.alone is None
    if database.dialect == "postgresql":
        assert first.alone is not None
        assert (first.alone.id, first.alone.event_id) == (first.item_id, "api:1")
        assert first.alone.status == QueueStatus.QUEUED and first.alone.attempts == 0
    else:
        assert first.alone is None  # SQLite does not say; the run reads its queue
