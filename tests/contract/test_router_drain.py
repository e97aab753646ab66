"""The router run: waiting events drained in batches, each session rung once or run inline."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from sqlalchemy import event as sql_event

from nexus.access.policy import load_policies, parse_policies
from nexus.arrival.settings import QueuePolicy
from nexus.db import Database, UnitOfWork
from nexus.doorbell import ROUTER_PENDING, CoalescingDoorbell, RecordingDoorbell
from nexus.engine.stream_events import StreamEvent
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.batch import ProcessedEvent, route_waiting
from nexus.ingest.drain import EventRouter
from nexus.ingest.service import ingest
from nexus.ledger.enums import Disposition, EventStatus, QueueMode, QueueStatus, TurnStatus
from nexus.ledger.records import EventRecord, NewQueueItem, QueueItemRecord
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.claims import InlineClaim
from nexus.sessions.runner import SessionRunner
from tests.contract.engine_support import build_rig
from tests.support import FakeClock, recorded_statements

POLICIES = load_policies(None)


def _store(database: Database, clock: FakeClock, *events: tuple[str, str]) -> None:
    """Store (event id, sender) pairs as Telegram DMs, one millisecond apart."""
    with database.unit_of_work() as uow:
        for event_id, sender in events:
            clock.advance(1)
            event = NexusEvent(
                id=event_id,
                adapter="telegram",
                platform="telegram",
                sender=Author(id=sender),
                container=Container(kind="dm", id=sender),
                text=f"{event_id} from {sender}",
                occurred_at=0,
            )
            ingest(uow, [event], RecordingDoorbell())
        uow.commit()


def _enable_a_hook(database: Database) -> None:
    """A hook registered and enabled (as `nexus hooks sync` leaves it): events stored from
    now on owe the hooks an evaluation."""
    with database.unit_of_work() as uow:
        uow.ledger.hooks.sync([("watch", "/hooks/watch.py", "", "persistent", None, "h")])
        uow.commit()


class _Runs:
    """Runs sessions inline by recording them; claims nothing ahead."""

    def __init__(self, ran: list[str]) -> None:
        self.ran = ran

    def claim_inline(
        self,
        uow: UnitOfWork,
        session_id: str,
        *,
        alone: tuple[QueueItemRecord, EventRecord] | None = None,
    ) -> InlineClaim | None:
        return None

    def run(self, session_id: str, *, claimed: InlineClaim | None = None) -> None:
        self.ran.append(session_id)


def _router(database: Database, **fields: object) -> tuple[EventRouter, RecordingDoorbell]:
    doorbell = RecordingDoorbell()
    router = EventRouter(
        database=database,
        policies=POLICIES,
        doorbell=doorbell,
        signals=InProcessCoordination(),
        queueing=QueuePolicy(),
        **fields,  # type: ignore[arg-type]
    )
    return router, doorbell


def test_one_run_routes_every_waiting_event_and_rings_each_session_once(
    database: Database, clock: FakeClock
) -> None:
    _store(database, clock, ("telegram:1", "ann"), ("telegram:2", "bob"), ("telegram:3", "ann"))
    router, doorbell = _router(database)
    routed = router.drain()
    assert [r.event_id for r in routed] == ["telegram:1", "telegram:2", "telegram:3"]
    assert all(r.disposition == "queued" for r in routed)
    ann, bob = routed[0].session_id, routed[1].session_id
    assert routed[2].session_id == ann and ann != bob
    assert doorbell.sessions == [ann, bob]  # once each, in the order they were first routed
    with database.unit_of_work() as uow:
        statuses = {uow.ledger.events.get(r.event_id).status for r in routed}  # type: ignore[union-attr]
        items = uow.ledger.queue.for_session(ann or "")
    assert statuses == {EventStatus.PROCESSED}
    assert [(i.event_id, i.status) for i in items] == [
        ("telegram:1", QueueStatus.QUEUED),
        ("telegram:3", QueueStatus.QUEUED),
    ]
    assert router.drain() == []  # nothing waits any more; a second ring is harmless


def test_a_known_senders_entity_is_read_with_the_waiting_events(
    database: Database, clock: FakeClock
) -> None:
    """The router's identity read is joined into its claim of the waiting events: a
    message from someone seen before costs no statement of its own for who they are."""
    _store(database, clock, ("telegram:1", "ann"))
    router, _ = _router(database)
    [first] = router.drain()
    _store(database, clock, ("telegram:2", "ann"))
    with recorded_statements(database) as sent:
        [second] = router.drain()
    statements = [" ".join(sql.split()) for sql in sent]
    assert second.session_id == first.session_id
    reading_entities = [s for s in statements if "FROM contacts" in s or "FROM entities" in s]
    assert reading_entities == []
    [claim] = [s for s in statements if "FROM events LEFT OUTER JOIN contacts" in s]
    assert "JOIN entities" in claim


def test_a_full_batch_is_followed_by_another_and_the_last_runs_one_session_inline(
    database: Database, clock: FakeClock
) -> None:
    _enable_a_hook(database)
    _store(database, clock, *((f"telegram:{n}", f"s{n % 3}") for n in range(1, 6)))
    ran: list[str] = []
    seen: list[ProcessedEvent] = []
    router, doorbell = _router(database, batch=2, runs=_Runs(ran), after_routing=seen.append)
    routed = router.drain()
    assert [r.event_id for r in routed] == [f"telegram:{n}" for n in range(1, 6)]
    assert [r.event_id for r in seen] == [r.event_id for r in routed]
    # Batches of 2, 2 and 1: the first two ring all their sessions; the last, short one
    # runs its session here instead of ringing it.
    assert ran == [routed[4].session_id]
    assert doorbell.sessions == [r.session_id for r in routed[:4]]


def test_the_hooks_are_run_after_routing_only_for_events_that_owe_them(
    database: Database, clock: FakeClock
) -> None:
    """No hook was enabled when the first event was stored: it owes the hooks nothing, so
    the router does not run them for it (a deployment without hooks pays nothing)."""
    _store(database, clock, ("telegram:1", "ann"))
    _enable_a_hook(database)
    _store(database, clock, ("telegram:2", "bob"))
    seen: list[ProcessedEvent] = []
    router, _ = _router(database, after_routing=seen.append)
    router.drain()
    assert [r.event_id for r in seen] == ["telegram:2"]


def test_a_run_lowers_the_pending_flag_before_it_reads(
    database: Database, clock: FakeClock
) -> None:
    signals = InProcessCoordination()
    inner = RecordingDoorbell()
    bell = CoalescingDoorbell(inner, signals)
    bell.event_received("telegram:1")
    bell.event_received("telegram:2")  # a drain is already pending: no second ring
    assert inner.events == ["telegram:1"]
    router = EventRouter(
        database=database,
        policies=POLICIES,
        doorbell=inner,
        signals=signals,
        queueing=QueuePolicy(),
    )
    router.drain()
    bell.event_received("telegram:3")  # committed after the drain began: it rings again
    assert inner.events == ["telegram:1", "telegram:3"]
    assert signals.raise_flag(ROUTER_PENDING, 1_000) is False


@pytest.mark.postgres
def test_two_routers_at_once_take_different_events(pg_database: Database, clock: FakeClock) -> None:
    # Sessions and persona exist already (first contact creates rows both would insert).
    _store(pg_database, clock, *((f"telegram:{n}", f"s{n}") for n in range(1, 5)))
    with pg_database.unit_of_work() as uow:
        route_waiting(uow, POLICIES)
        uow.commit()
    _store(pg_database, clock, *((f"telegram:{n}", f"s{n - 4}") for n in range(5, 9)))
    with pg_database.unit_of_work() as first:
        taken = route_waiting(first, POLICIES, limit=2)
        # The first run's events stay locked until it commits; the second skips them.
        with pg_database.unit_of_work() as second:
            others = route_waiting(second, POLICIES, limit=10)
            second.commit()
        first.commit()
    assert [e.event_id for e in taken.events] == ["telegram:5", "telegram:6"]
    assert [e.event_id for e in others.events] == ["telegram:7", "telegram:8"]


@pytest.mark.postgres
def test_a_run_of_one_event_locks_its_session_with_the_read_that_resolves_it(
    pg_database: Database, clock: FakeClock
) -> None:
    """One event has one session, so no lock order to keep: the resolve takes the lock
    (no statement of its own), and the cap's count and the event's disposition come with
    the enqueue. Another router waits for that lock until the run commits, as it waited
    for the separate one."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    _store(pg_database, clock, ("telegram:1", "ann"))
    with pg_database.unit_of_work() as uow:
        [first] = route_waiting(uow, POLICIES).events
        uow.commit()
    _store(pg_database, clock, ("telegram:2", "ann"))
    with recorded_statements(pg_database) as seen, pg_database.unit_of_work() as uow:
        [second] = route_waiting(uow, POLICIES).events
        # The session's lock is held: another transaction cannot take it meanwhile.
        with pg_database.unit_of_work() as other:
            other.connection.execute(text("SET LOCAL lock_timeout = '100ms'"))
            with pytest.raises(OperationalError, match="lock timeout"):
                other.ledger.sessions.lock(first.session_id or "")
        uow.commit()
    # The run's own statements: those before the other transaction's.
    ours = [s for s in seen[: seen.index("SET LOCAL lock_timeout = '100ms'")]]
    ours = [s for s in ours if not s.startswith("BEGIN")]
    assert second.disposition == "queued" and second.session_id == first.session_id
    # The waiting event, its session (read and locked), the item (with the cap's count and
    # the event's disposition).
    assert len(ours) == 3, ours
    assert "FOR NO KEY UPDATE" in ours[1]
    with pg_database.unit_of_work() as uow:
        settled = uow.ledger.events.get("telegram:2")
    assert settled is not None and settled.status == EventStatus.PROCESSED
    assert settled.disposition == "queued"


def test_a_ring_delivered_again_rings_the_session_its_event_still_waits_in(
    database: Database, clock: FakeClock
) -> None:
    # The process that routed telegram:1 died in the turn it ran inline; Celery delivers
    # its ring again. Nothing waits for the router now, but the session still owes a turn.
    _store(database, clock, ("telegram:1", "ann"))
    router, doorbell = _router(database, runs=_Runs([]))
    [first] = router.drain(rang_for="telegram:1")
    assert doorbell.sessions == []  # it was run inline, not rung
    assert router.drain(rang_for="telegram:1") == []
    assert doorbell.sessions == [first.session_id]
    with database.unit_of_work() as uow:
        [item] = uow.ledger.queue.for_session(first.session_id or "")
        uow.ledger.queue.dispose(
            [item.id], status=QueueStatus.DONE, disposition=Disposition.CONSUMED
        )
        uow.commit()
    router.drain(rang_for="telegram:1")  # settled since: nothing more to ring
    assert doorbell.sessions == [first.session_id]


def test_a_run_locks_its_sessions_in_one_order_whatever_order_their_events_came_in(
    database: Database, clock: FakeClock
) -> None:
    # Two routers at once, each locking the sessions of its batch in arrival order, would
    # deadlock when the orders cross (Postgres breaks it after a second, and a run fails).
    _store(database, clock, ("telegram:1", "zed"), ("telegram:2", "amy"), ("telegram:3", "kim"))
    with database.unit_of_work() as uow:
        route_waiting(uow, POLICIES)  # the sessions exist from here on
        uow.commit()
    _store(database, clock, ("telegram:4", "kim"), ("telegram:5", "zed"), ("telegram:6", "amy"))
    locked: list[str] = []
    with database.unit_of_work() as uow:
        lock = uow.ledger.sessions.lock

        def recording(session_id: str) -> int:
            locked.append(session_id)
            return lock(session_id)

        uow.ledger.sessions.lock = recording  # type: ignore[method-assign]
        drained = route_waiting(uow, POLICIES)
        uow.commit()
    assert len(locked) == 3 and locked == sorted(locked)
    assert [e.event_id for e in drained.events] == ["telegram:4", "telegram:5", "telegram:6"]


class _CountingAborts(InProcessCoordination):
    """Counts aborts, and keeps each publish's event types (one publish, one round trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.aborts: list[str] = []
        self.publishes: list[list[str]] = []

    def request_abort(self, session_id: str, *, epoch: int) -> None:
        self.aborts.append(session_id)
        super().request_abort(session_id, epoch=epoch)

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        self.publishes.append([event.type for event in events])
        super().publish_many(events)


def _inline(database: Database, clock: FakeClock) -> tuple[EventRouter, _CountingAborts]:
    """A router that runs sessions inline with a real session run over the rig's engine."""
    coordination = _CountingAborts()
    # As deployed, the router and the turn publish to one stream store.
    turns = dataclasses.replace(build_rig(database, clock).turns, publisher=coordination)
    runner = SessionRunner(
        database=database,
        turns=turns,
        coordination=coordination,
        doorbell=RecordingDoorbell(),
        clock=clock,
    )
    router = EventRouter(
        database=database,
        policies=POLICIES,
        doorbell=RecordingDoorbell(),
        signals=coordination,
        queueing=QueuePolicy(),
        runs=runner,
    )
    return router, coordination


def test_an_inline_run_claims_its_first_turn_in_the_routing_transaction(
    database: Database, clock: FakeClock
) -> None:
    """Routing and the inline session's claim commit together: two transactions for a
    message answered inline (route and claim, then the turn), where there were three."""
    _store(database, clock, ("telegram:1", "ann"))
    router, coordination = _inline(database, clock)
    commits: list[object] = []

    def committed(connection: object) -> None:
        commits.append(connection)

    sql_event.listen(database.engine, "commit", committed)
    try:
        [routed] = router.drain(rang_for="telegram:1")
    finally:
        sql_event.remove(database.engine, "commit", committed)
    assert len(commits) == 2
    with database.unit_of_work() as uow:
        [item] = uow.ledger.queue.for_session(routed.session_id or "")
        session = uow.ledger.sessions.get(routed.session_id or "")
    assert item.status == QueueStatus.DONE and item.disposition == Disposition.CONSUMED
    assert session is not None and session.thread_id == item.consumed_by_turn_id
    assert not coordination.lease_held(f"session:{routed.session_id}")


def test_what_the_router_announces_for_an_inline_session_goes_with_the_turns_first_publish(
    database: Database, clock: FakeClock
) -> None:
    """`queue.item.queued` for the session the router runs itself is held back and sent in
    the turn's first publish, before `session.started`: one Redis round trip fewer. A
    session rung rather than run hears of its queue at once."""
    _store(database, clock, ("telegram:1", "ann"))
    router, coordination = _inline(database, clock)
    router.drain(rang_for="telegram:1")
    first = coordination.publishes[0]
    assert first[:3] == ["queue.item.queued", "session.started", "step.started"]
    assert sum(p.count("queue.item.queued") for p in coordination.publishes) == 1
    # Two sessions in one run: the one not run inline is announced on its own.
    coordination.publishes.clear()
    _store(database, clock, ("telegram:2", "bob"), ("telegram:3", "cat"))
    router.drain()
    announced_alone = [p for p in coordination.publishes if p == ["queue.item.queued"]]
    leading = [
        p for p in coordination.publishes if p[:2] == ["queue.item.queued", "session.started"]
    ]
    assert len(announced_alone) == 1 and len(leading) == 1


def test_a_routing_commit_that_fails_gives_the_inline_lease_back(
    database: Database, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store(database, clock, ("telegram:1", "ann"))
    router, coordination = _inline(database, clock)
    [first] = router.drain(rang_for="telegram:1")  # the session exists from here on
    _store(database, clock, ("telegram:2", "ann"))

    def failing(uow: UnitOfWork) -> None:
        raise RuntimeError("the database went away")

    with monkeypatch.context() as patched:
        patched.setattr(UnitOfWork, "commit", failing)
        with pytest.raises(RuntimeError):
            router.drain(rang_for="telegram:2")
    with database.unit_of_work() as uow:
        waiting = uow.ledger.events.get("telegram:2")
        items = uow.ledger.queue.for_session(first.session_id or "")
    assert waiting is not None and waiting.status == EventStatus.RECEIVED  # nothing routed
    assert [i.event_id for i in items] == ["telegram:1"]  # nothing queued or claimed
    assert not coordination.lease_held(f"session:{first.session_id}")
    [second] = router.drain(rang_for="telegram:2")  # and the next ring answers it
    assert second.session_id == first.session_id


def test_a_session_claimed_inline_is_sent_no_abort_but_a_busy_one_is(
    database: Database, clock: FakeClock
) -> None:
    """A person's message interrupts a running turn. The session the router claims inline
    runs none (the router holds its lease), so no abort is raised for it; a session whose
    lease another run holds gets one."""
    _store(database, clock, ("telegram:1", "ann"))
    router, coordination = _inline(database, clock)
    [first] = router.drain(rang_for="telegram:1")
    assert coordination.aborts == []
    session = first.session_id or ""
    held = coordination.acquire(f"session:{session}", 30_000)  # another worker's run
    assert held is not None
    _store(database, clock, ("telegram:2", "ann"))
    router.drain(rang_for="telegram:2")
    assert coordination.aborts == [session]
    held.release()


def test_an_abort_raised_before_a_turn_was_claimed_does_not_stop_it(
    database: Database, clock: FakeClock
) -> None:
    """An abort left from before the turn (raised while another run held the session, at
    the epoch it read then) does not stop it, and nothing is cleared for that: the turn,
    claimed at a later epoch, ignores it, however long before its first look."""
    _store(database, clock, ("telegram:1", "ann"))
    router, coordination = _inline(database, clock)
    [first] = router.drain(rang_for="telegram:1")
    session = first.session_id or ""
    with database.unit_of_work() as uow:
        epoch = uow.ledger.sessions.lock(session)
    coordination.request_abort(session, epoch=epoch)  # stale: raised before this turn began
    _store(database, clock, ("telegram:2", "ann"))
    clock.advance(60_000)
    router.drain(rang_for="telegram:2")
    with database.unit_of_work() as uow:
        second = [i for i in uow.ledger.queue.for_session(session) if i.event_id == "telegram:2"]
        turn = uow.ledger.threads.get_turn(second[0].consumed_by_turn_id or "")
    assert second[0].status == QueueStatus.DONE
    assert turn is not None and turn.turn.status == TurnStatus.COMPLETED  # not aborted
    assert coordination.abort_epoch(session) == epoch  # left to expire, meaning nothing


def test_an_inline_claim_of_a_lone_item_does_not_read_the_queue_again(
    database: Database, clock: FakeClock
) -> None:
    """The router's enqueue says when its item is all the session has open (Postgres): the
    inline claim then takes it without reading the queue. With anything else open (here a
    claim a dead run left) the claim reads the queue, which finds the stale claim and
    leaves the session to its run, which settles it first."""
    _store(database, clock, ("telegram:1", "ann"))
    router, _ = _inline(database, clock)
    [first] = router.drain(rang_for="telegram:1")
    session = first.session_id or ""

    def queue_reads() -> int:
        return sum("FROM queue_items LEFT OUTER JOIN events" in sql for sql in seen)

    _store(database, clock, ("telegram:2", "ann"))
    with recorded_statements(database) as seen:
        router.drain(rang_for="telegram:2")
        lone_reads = queue_reads()
        with database.unit_of_work() as uow:  # a run that died holding a claim
            stale, _ = uow.ledger.queue.enqueue(
                NewQueueItem(session_id=session, mode=QueueMode.QUEUE)
            )
            epoch = uow.ledger.sessions.claim(session)
            uow.ledger.queue.claim_ids([stale], epoch=epoch, lease_ms=1_000)
            uow.commit()
        seen.clear()
        _store(database, clock, ("telegram:3", "ann"))
        router.drain(rang_for="telegram:3")
    assert lone_reads == (0 if database.dialect == "postgresql" else 1)
    assert queue_reads() >= 1
    with database.unit_of_work() as uow:
        items = {i.event_id: i for i in uow.ledger.queue.for_session(session)}
    assert items["telegram:2"].status == QueueStatus.DONE
    assert items["telegram:3"].status in (QueueStatus.QUEUED, QueueStatus.DONE)


def test_a_batchs_dispositions_are_written_with_its_last_enqueue(
    database: Database, clock: FakeClock
) -> None:
    """Every event of a batch gets its disposition - queued for two sessions, denied for a
    group message no policy admits - written by the batch's last enqueue (no statement of
    its own on Postgres); a batch that queues nothing writes them alone."""
    dms_only = parse_policies(
        "- name: dms-only\n  match: {delivery: {peer_kind: dm}}\n"
        "  session: {key: 'dm:{principal.entity_id}', persona: atlas}\n"
    )
    _store(database, clock, ("telegram:1", "ann"), ("telegram:2", "bob"))
    group = NexusEvent(
        id="telegram:3",
        adapter="telegram",
        platform="telegram",
        sender=Author(id="cat"),
        container=Container(kind="group", id="-1"),
        text="in a group",
        occurred_at=0,
    )
    with database.unit_of_work() as uow:
        ingest(uow, [group], RecordingDoorbell())
        uow.commit()
    with recorded_statements(database) as seen, database.unit_of_work() as uow:
        drained = route_waiting(uow, dms_only)
        uow.commit()
    with database.unit_of_work() as uow:
        stored = {n: uow.ledger.events.get(f"telegram:{n}") for n in (1, 2, 3)}
    assert [e.disposition for e in drained.events] == ["queued", "queued", "denied"]
    assert all(e is not None and e.status == EventStatus.PROCESSED for e in stored.values())
    assert [e.disposition for e in stored.values() if e] == ["queued", "queued", "denied"]
    assert stored[3] is not None and "no policy matched" in (stored[3].disposition_detail or "")
    if database.dialect == "postgresql":
        assert not [s for s in seen if s.lstrip().startswith("UPDATE events")]
    # Only denied events: nothing to ride with, the dispositions are written alone.
    with database.unit_of_work() as uow:
        ingest(uow, [group.model_copy(update={"id": "telegram:4"})], RecordingDoorbell())
        uow.commit()
    with database.unit_of_work() as uow:
        [denied] = route_waiting(uow, dms_only).events
        uow.commit()
    with database.unit_of_work() as uow:
        alone = uow.ledger.events.get("telegram:4")
    assert denied.disposition == "denied"
    assert alone is not None and alone.disposition == "denied"
