"""Takeovers and a message's attempts, on SQLite and every Postgres driver: a run whose
lease lapsed while it was alive (its keep-alive starved of CPU, its process paused) and
that comes back fenced gives back the attempt its claim counted; a run that never comes
back keeps it (docs/runtime.md, "Attempts and takeovers").

Each run below has a coordination of its own, so the next one finds no lease: the first
run's lease lapsed. The order of the runs is held by events, never by time."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from nexus.adapters.scripted import Fail, Say
from nexus.db import Database
from nexus.engine.model import ModelError, ModelRequest
from nexus.ledger.enums import Disposition, QueueStatus
from nexus.ledger.records import QueueItemRecord
from nexus.queueing.attempts import gives_back
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.claims import RunReport
from nexus.sessions.runner import SessionRunner
from tests.contract.test_session_runner import Setup, _chain_texts, _enqueue, _setup
from tests.support import FakeClock

WAIT_S = 30  # a bound on a wait for an event, never a pause


def _item(setup: Setup, item_id: str) -> QueueItemRecord:
    with setup.rig.database.unit_of_work() as uow:
        item = uow.ledger.queue.get(item_id)
    assert item is not None
    return item


def _off_chain(database: Database) -> list[tuple[str, str | None]]:
    with database.unit_of_work() as uow:
        rows = uow.connection.exec_driver_sql(
            "SELECT status, error_kind FROM turns WHERE status IN ('failed', 'superseded') "
            "ORDER BY epoch, status"
        ).all()
    return [(row[0], row[1]) for row in rows]


def _another_worker(setup: Setup) -> SessionRunner:
    """A run on another worker: it shares the ledger and the model, not the lease."""
    return dataclasses.replace(setup.runner, coordination=InProcessCoordination())


def test_a_takeover_of_a_live_run_spends_none_of_the_messages_attempts(
    database: Database, clock: FakeClock
) -> None:
    """Run A claims; its lease lapses mid-turn; run B takes over and answers; A's commit
    is fenced. The message was answered at the first try that counts: one attempt."""
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "are you there?")
    taken_over: list[RunReport] = []

    def answer_after_a_takeover(request: ModelRequest) -> Say:
        assert _item(setup, item_id).attempts == 1  # A's claim counted
        taken_over.append(_another_worker(setup).run(setup.session_id))
        assert _item(setup, item_id).attempts == 2  # and B's: A may be dead, for all B knows
        return Say("from A, too late")

    setup.rig.model.push(answer_after_a_takeover, Say("from B"))
    report = setup.runner.run(setup.session_id)
    assert (report.status, report.turns) == ("fenced", 0)
    assert [(r.status, r.turns) for r in taken_over] == [("done", 1)]
    item = _item(setup, item_id)
    assert (item.status, item.disposition) == (QueueStatus.DONE, Disposition.CONSUMED)
    assert item.attempts == 1  # A was alive: its fence gave its attempt back
    assert _chain_texts(setup) == [["are you there?"]]
    assert _off_chain(database) == [("failed", "worker_lost"), ("superseded", None)]


def test_a_run_that_died_still_spends_an_attempt(database: Database, clock: FakeClock) -> None:
    """A run claims and is never heard of again (kill -9): the run that takes over answers,
    and the lost run's attempt stands, so a message that kills workers is dead-lettered."""
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "are you there?")
    with database.unit_of_work() as uow:  # a run claims, then its process dies
        epoch = uow.ledger.sessions.claim(setup.session_id)
        uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=10**9)
        uow.commit()
    setup.rig.model.push(Say("answered"))
    assert setup.runner.run(setup.session_id).turns == 1
    item = _item(setup, item_id)
    assert (item.status, item.attempts) == (QueueStatus.DONE, 2)
    assert _off_chain(database) == [("failed", "worker_lost")]


def test_runs_that_die_holding_a_message_dead_letter_it_after_three(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "poison")
    for _ in range(3):  # three runs claim it and die in its turn
        with database.unit_of_work() as uow:
            epoch = uow.ledger.sessions.claim(setup.session_id)
            uow.ledger.queue.reclaim(setup.session_id, max_attempts=3)
            uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=10**9)
            uow.commit()
    assert _item(setup, item_id).attempts == 3
    setup.runner.run(setup.session_id)
    item = _item(setup, item_id)
    assert (item.status, item.disposition) == (QueueStatus.DEAD, Disposition.DEAD_LETTERED)
    assert list(setup.rig.model.requests) == []  # never handed to the model again


@dataclasses.dataclass
class _Held:
    """A run in another thread, held in its model call until let go."""

    name: str
    started: threading.Event = dataclasses.field(default_factory=threading.Event)
    go: threading.Event = dataclasses.field(default_factory=threading.Event)
    reports: list[RunReport] = dataclasses.field(default_factory=list)
    thread: threading.Thread | None = None

    def respond(self, request: ModelRequest) -> Say:
        self.started.set()
        assert self.go.wait(WAIT_S), f"{self.name} was never let go"
        return Say(f"from {self.name}")

    def start(self, runner: SessionRunner, session_id: str) -> None:
        def run() -> None:
            self.reports.append(runner.run(session_id))

        self.thread = threading.Thread(target=run, name=f"run {self.name}", daemon=True)
        self.thread.start()
        assert self.started.wait(WAIT_S), f"{self.name} never reached its model call"

    def finish(self) -> RunReport:
        assert self.thread is not None
        self.go.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), f"{self.name} did not end"
        (report,) = self.reports
        return report


def test_three_takeovers_of_live_runs_do_not_dead_letter_a_message_that_never_failed(
    database: Database, clock: FakeClock
) -> None:
    """Runs A, B and C each lose their lease mid-turn and are taken over, then come back
    fenced; D answers. Counted as crashes, the third takeover would dead-letter it."""
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "hello?")
    a, b, c = _Held("A"), _Held("B"), _Held("C")
    setup.rig.model.push(a.respond, b.respond, c.respond, Say("from D"))
    a.start(_another_worker(setup), setup.session_id)
    b.start(_another_worker(setup), setup.session_id)  # A's lease lapsed: B takes over
    assert a.finish().status == "fenced"
    c.start(_another_worker(setup), setup.session_id)  # B's lapsed: C takes over
    assert b.finish().status == "fenced"
    report = _another_worker(setup).run(setup.session_id)  # C's lapsed: D takes over
    assert (report.status, report.turns) == ("done", 1)
    assert c.finish().status == "fenced"
    item = _item(setup, item_id)
    assert (item.status, item.disposition) == (QueueStatus.DONE, Disposition.CONSUMED)
    assert item.attempts == 1
    assert _chain_texts(setup) == [["hello?"]]
    off_chain = _off_chain(database)
    assert sorted(off_chain) == [("failed", "worker_lost")] * 3 + [("superseded", None)] * 3


def test_a_run_that_fails_after_a_takeover_leaves_the_message_to_the_run_that_took_it(
    database: Database, clock: FakeClock
) -> None:
    """The model fails run A's turn after run B took the message over: A's failure settles
    nothing B holds (no dead letter, no backoff), whatever A counted when it claimed."""
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "are you there?")
    taken_at: list[int] = []

    def fail_after_a_takeover(request: ModelRequest) -> Fail:
        with database.unit_of_work() as uow:  # B: reclaims A's claim and claims again
            epoch = uow.ledger.sessions.claim(setup.session_id)
            uow.ledger.queue.reclaim(setup.session_id, max_attempts=3)
            uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=10**9)
            uow.commit()
        taken_at.append(epoch)
        return Fail(ModelError("model_error", "overloaded", retryable=True))

    setup.rig.model.push(fail_after_a_takeover)
    # A would dead-letter at its first failure: its claim's count is all it is allowed.
    once = dataclasses.replace(setup.runner, max_attempts=1)
    once.run(setup.session_id)
    item = _item(setup, item_id)
    assert (item.status, item.claimed_epoch) == (QueueStatus.CLAIMED, taken_at[0])
    assert item.available_at <= clock.now  # no backoff set by A
    assert item.attempts == 2  # A's failure counts: the model failed it


def _claimed_twice(setup: Setup, item_id: str) -> tuple[int, int]:
    """A claims, B reclaims and claims again: the two epochs."""
    epochs = []
    for _ in range(2):
        with setup.rig.database.unit_of_work() as uow:
            epoch = uow.ledger.sessions.claim(setup.session_id)
            uow.ledger.queue.reclaim(setup.session_id, max_attempts=3)
            uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=10**9)
            uow.commit()
        epochs.append(epoch)
    return epochs[0], epochs[1]


def _settled_by_b(setup: Setup, item_id: str, epoch_b: int, how: str) -> None:
    with setup.rig.database.unit_of_work() as uow:
        if how == "answered":
            uow.ledger.queue.dispose(
                [item_id], status=QueueStatus.DONE, disposition=Disposition.CONSUMED
            )
        elif how == "dead":
            uow.ledger.queue.dispose(
                [item_id], status=QueueStatus.DEAD, disposition=Disposition.DEAD_LETTERED
            )
        elif how == "released":
            uow.ledger.queue.release([item_id], epoch=epoch_b)
        uow.commit()


@pytest.mark.parametrize("how", ["held by B", "answered", "released", "dead"])
def test_handing_back_a_fenced_claim_follows_the_pure_rule(
    database: Database, clock: FakeClock, how: str
) -> None:
    """`hand_back_fenced` is `gives_back` in SQL: for each state a taken-over item can be in
    when its first run comes back fenced, the count changes as the rule says (a dead
    letter keeps its count), and nothing else does."""
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "hello")
    epoch_a, epoch_b = _claimed_twice(setup, item_id)
    _settled_by_b(setup, item_id, epoch_b, how)
    before = _item(setup, item_id)
    expected = gives_back(
        fenced_epoch=epoch_a,
        status=QueueStatus(before.status),
        claimed_epoch=before.claimed_epoch,
        attempts=before.attempts,
    )
    assert expected is (how != "dead")
    with database.unit_of_work() as uow:
        requeued, given = uow.ledger.queue.hand_back_fenced([item_id], epoch=epoch_a)
        uow.commit()
    after = _item(setup, item_id)
    assert (requeued, given) == (0, int(expected))
    assert after.attempts == before.attempts - int(expected)
    assert after.model_dump(exclude={"attempts"}) == before.model_dump(exclude={"attempts"})


def test_a_fenced_run_that_still_holds_its_items_hands_them_back_without_its_attempt(
    database: Database, clock: FakeClock
) -> None:
    """The epoch moved on while no other run took the items (say, a takeover that claimed
    nothing yet): the fenced run puts them back in the queue, its attempt given back."""
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "hello")
    with database.unit_of_work() as uow:
        epoch = uow.ledger.sessions.claim(setup.session_id)
        uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=10**9)
        uow.ledger.sessions.claim(setup.session_id)  # the epoch moves on
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.queue.held([item_id], epoch=epoch) != []
        assert uow.ledger.queue.hand_back_fenced([item_id], epoch=epoch) == (1, 1)
        uow.commit()
    item = _item(setup, item_id)
    assert (item.status, item.attempts) == (QueueStatus.QUEUED, 0)
