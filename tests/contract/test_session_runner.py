"""The session run in one process (in-process coordination), on SQLite and Postgres: queue
modes, steering, failures and dead letters, stale claims, caps."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import text

from nexus.access.policy import load_policies
from nexus.adapters.scripted import CallTools, Fail, Say
from nexus.arrival.messages import request_compaction
from nexus.arrival.settings import QueuePolicy
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.engine.model import ModelError
from nexus.engine.query import QueryMessage
from nexus.engine.stream import RecordingPublisher
from nexus.engine.stream_events import StreamEvent
from nexus.ingest.service import ingest
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus, TurnStatus, TurnType
from nexus.ledger.records import EventDraft, NewQueueItem, QueueItemRecord
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from nexus.sessions.signals import ABORT_POLL_MS
from tests.contract.engine_support import RecordingTool, Rig, build_rig
from tests.contract.test_routing import _message
from tests.support import FakeClock, RunOnRing, route_one


@dataclass
class Setup:
    rig: Rig
    runner: SessionRunner
    coordination: InProcessCoordination
    doorbell: RecordingDoorbell
    session_id: str
    clock: FakeClock


def _setup(database: Database, clock: FakeClock, *tools: RecordingTool) -> Setup:
    rig = build_rig(database, clock, tools=tools, granted=[t.name for t in tools])
    session = rig.session(capabilities=["test_tools"] if tools else ())
    coordination = InProcessCoordination()
    doorbell = RecordingDoorbell()
    runner = SessionRunner(
        database=database,
        turns=rig.turns,
        coordination=coordination,
        doorbell=doorbell,
        clock=clock,
    )
    return Setup(rig, runner, coordination, doorbell, session.id, clock)


def _enqueue(setup: Setup, text: str, mode: QueueMode = QueueMode.QUEUE) -> str:
    database = setup.rig.database
    setup.clock.advance(1)
    with database.unit_of_work() as uow:
        event_id = f"api:{text}"
        uow.ledger.events.insert(
            EventDraft(
                id=event_id, adapter="api", platform="api", text=text, occurred_at=setup.clock.now
            )
        )
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=setup.session_id, event_id=event_id, mode=mode)
        )
        uow.commit()
    return item_id


def _epoch(setup: Setup) -> int:
    """The session's epoch as a router reads it to raise a signal (under the row lock)."""
    with setup.rig.database.unit_of_work() as uow:
        return uow.ledger.sessions.lock(setup.session_id)


def _items(setup: Setup) -> list[QueueItemRecord]:
    with setup.rig.database.unit_of_work() as uow:
        return uow.ledger.queue.for_session(setup.session_id)


def _chain_texts(setup: Setup) -> list[list[str]]:
    """The user texts of each turn on the chain, oldest first."""
    with setup.rig.database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(setup.session_id)
        assert session is not None
        views = uow.ledger.threads.read_ancestry(session.thread_id) if session.thread_id else []
    return [[m.content["text"] for m in v.messages if m.role.value == "user"] for v in views]


def test_queue_mode_answers_each_item_once_in_order(database: Database, clock: FakeClock) -> None:
    setup = _setup(database, clock)
    ids = [_enqueue(setup, f"m{n}") for n in range(5)]
    report = setup.runner.run(setup.session_id)
    assert (report.status, report.turns) == ("done", 5)
    assert _chain_texts(setup) == [[f"m{n}"] for n in range(5)]
    items = {i.id: i for i in _items(setup)}
    assert all(items[i].disposition == Disposition.CONSUMED for i in ids)
    assert len({items[i].consumed_by_turn_id for i in ids}) == 5


def test_a_message_that_is_only_a_photo_reaches_the_model_and_the_ledger(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    photo = {"kind": "image", "file_id": "AgAC", "mime_type": "image/jpeg", "size": 900}
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(
            EventDraft(
                id="telegram:1",
                adapter="telegram",
                platform="telegram",
                attachments=(photo,),
                occurred_at=clock.now,
            )
        )
        uow.ledger.queue.enqueue(
            NewQueueItem(session_id=setup.session_id, event_id="telegram:1", mode=QueueMode.QUEUE)
        )
        uow.commit()
    seen: list[object] = []

    def look(request: object) -> Say:
        seen.append(request)
        return Say("a photo")

    setup.rig.model.push(look)
    assert setup.runner.run(setup.session_id).turns == 1
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(setup.session_id)
        assert session is not None and session.thread_id is not None
        (view,) = uow.ledger.threads.read_ancestry(session.thread_id)
    assert view.messages[0].content["attachments"] == [photo]
    (request,) = seen
    shown = [b.get("text") for b in request.messages[0]["content"]]  # type: ignore[attr-defined]
    # No empty text block; the photo is described (the scripted engine has no file source).
    assert shown[1:] == [
        "[attachment] image, image/jpeg, 900 bytes",
        "(the image is not shown: no way to fetch it here)",
    ]


def test_collect_waits_for_the_quiet_window_then_runs_one_turn(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    for n in range(3):
        _enqueue(setup, f"c{n}", QueueMode.COLLECT)
    assert setup.runner.run(setup.session_id).status == "waiting"
    assert setup.doorbell.later and 0 < setup.doorbell.later[-1][1] <= 1_000
    clock.advance(1_000)
    assert setup.runner.run(setup.session_id).turns == 1
    assert _chain_texts(setup) == [["c0", "c1", "c2"]]
    assert {i.disposition for i in _items(setup)} == {Disposition.BATCHED}


def test_an_interrupt_takes_the_backlog_with_it(database: Database, clock: FakeClock) -> None:
    setup = _setup(database, clock)
    _enqueue(setup, "older", QueueMode.FOLLOWUP)
    _enqueue(setup, "stop, do this", QueueMode.INTERRUPT)
    assert setup.runner.run(setup.session_id).turns == 1
    assert _chain_texts(setup) == [["older", "stop, do this"]]


def test_an_interrupt_aborts_the_running_turn_which_keeps_its_partial_text(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    _enqueue(setup, "tell me a long story")
    late: list[str] = []

    def interrupted(request: object) -> Say:
        late.append(_enqueue(setup, "never mind", QueueMode.INTERRUPT))
        # what the router does
        setup.coordination.request_abort(setup.session_id, epoch=_epoch(setup))
        clock.advance(ABORT_POLL_MS)  # the turn asks the flag again once this has passed
        return Say("Once upon a time there was")

    setup.rig.model.push(interrupted, Say("ok, never mind"))
    assert setup.runner.run(setup.session_id).turns == 2
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(setup.session_id)
        assert session is not None and session.thread_id is not None
        chain = uow.ledger.threads.read_ancestry(session.thread_id)
    assert [v.turn.status for v in chain] == [TurnStatus.ABORTED, TurnStatus.COMPLETED]
    assert chain[0].messages[-1].content == {"text": "Once ", "partial": True}
    assert _chain_texts(setup)[1] == ["never mind"]


def test_a_steer_joins_the_running_turn_and_no_second_turn_runs(
    database: Database, clock: FakeClock
) -> None:
    probe = RecordingTool("probe")
    setup = _setup(database, clock, probe)
    _enqueue(setup, "draft the email")
    steered: list[str] = []

    def steer() -> None:
        item_id = _enqueue(setup, "make it shorter", QueueMode.STEER)
        steered.append(item_id)
        setup.coordination.steer(
            setup.session_id,
            QueryMessage(text="make it shorter", queue_item_id=item_id),
            epoch=_epoch(setup),
        )

    probe.on_call = steer
    setup.rig.model.push(CallTools((("probe", {}),)), Say("Short email."))
    report = setup.runner.run(setup.session_id)
    assert report.turns == 1
    assert _chain_texts(setup) == [["draft the email", "make it shorter"]]
    (item,) = [i for i in _items(setup) if i.id == steered[0]]
    assert (item.status, item.disposition) == (QueueStatus.DONE, Disposition.INJECTED)


def test_a_failing_item_is_retried_then_dead_lettered_and_the_session_moves_on(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    poison = _enqueue(setup, "poison")
    _enqueue(setup, "next")
    down = ModelError("model_error", "overloaded", retryable=True)
    setup.rig.model.push(Fail(down), Fail(down), Fail(down), Say("answered next"))
    for _ in range(3):
        setup.runner.run(setup.session_id)
        clock.advance(60_000)  # past the retry backoff
    setup.runner.run(setup.session_id)
    items = {i.id: i for i in _items(setup)}
    assert items[poison].status == QueueStatus.DEAD
    assert items[poison].disposition == Disposition.DEAD_LETTERED
    assert "overloaded" in (items[poison].disposition_detail or "")
    assert _chain_texts(setup) == [["next"]]


def test_a_claim_left_by_a_dead_run_is_answered_once_and_the_loss_recorded(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    item_id = _enqueue(setup, "are you there?")
    with database.unit_of_work() as uow:  # a run claims, then its process dies
        epoch = uow.ledger.sessions.claim(setup.session_id)
        uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=10**9)
        uow.commit()
    assert setup.runner.run(setup.session_id).turns == 1
    assert _chain_texts(setup) == [["are you there?"]]
    with database.unit_of_work() as uow:
        lost = uow.connection.exec_driver_sql(
            "SELECT status, error_kind FROM turns WHERE error_kind = 'worker_lost'"
        ).all()
    assert [(row[0], row[1]) for row in lost] == [("failed", "worker_lost")]


def test_a_held_lease_means_busy_and_nothing_runs(database: Database, clock: FakeClock) -> None:
    setup = _setup(database, clock)
    _enqueue(setup, "hello")
    lease = setup.coordination.acquire(f"session:{setup.session_id}", ttl_ms=60_000)
    assert lease is not None
    assert setup.runner.run(setup.session_id).status == "busy"
    assert _chain_texts(setup) == []


def test_a_turn_past_its_time_limit_is_aborted(database: Database, clock: FakeClock) -> None:
    setup = _setup(database, clock)
    setup.runner.turn_time_limit_ms = 5_000
    _enqueue(setup, "think hard")

    def slow(request: object) -> Say:
        clock.advance(10_000)  # the model took too long
        return Say("I was still thinking when")

    setup.rig.model.push(slow)
    setup.runner.run(setup.session_id)
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(setup.session_id)
        assert session is not None and session.thread_id is not None
        turn = uow.ledger.threads.get_turn(session.thread_id)
    assert turn is not None and turn.turn.status == TurnStatus.ABORTED


def test_25_messages_over_a_cap_of_20_drop_5_with_one_notice(
    database: Database, clock: FakeClock
) -> None:
    doorbell = RecordingDoorbell()
    policies = load_policies(None)
    with database.unit_of_work() as uow:
        for n in range(25):
            clock.advance(1)
            ingest(uow, [_message(f"sms:{n}", "sms", "+1555", f"message {n}")], doorbell)
            route_one(
                uow, f"sms:{n}", policies, doorbell, queueing=QueuePolicy(cap=20, drop="summarize")
            )
        uow.commit()
        items = uow.connection.exec_driver_sql(
            "SELECT status, disposition, session_id FROM queue_items ORDER BY enqueued_at"
        ).all()
    assert [tuple(row[:2]) for row in items[:5]] == [("dropped", "dropped")] * 5
    assert {tuple(row[:2]) for row in items[5:]} == {("queued", None)}
    # The session's next run tells the sender once, and its first turn reads the gist.
    rig = build_rig(database, clock)
    runner = SessionRunner(
        database=database,
        turns=rig.turns,
        coordination=InProcessCoordination(),
        doorbell=doorbell,
        clock=clock,
    )
    report = runner.run(items[0][2])
    with database.unit_of_work() as uow:
        notices = uow.connection.exec_driver_sql(
            "SELECT text FROM events WHERE kind = 'notice' AND direction = 'outbound'"
        ).all()
    assert report.turns == 1  # a person's messages interrupt: the 20 left run as one batch
    assert len(notices) == 1 and "message 0" in notices[0][0] and "message 4" in notices[0][0]
    first_turn = rig.model.requests[0].messages[-1]["content"]
    assert any("5 earlier messages were dropped" in block["text"] for block in first_turn)


def test_a_steer_during_the_final_answer_gets_one_more_model_call_in_the_same_turn(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    _enqueue(setup, "summarise the report")
    steered: list[str] = []

    def answer_while_steered(request: object) -> Say:
        item_id = _enqueue(setup, "only the numbers", QueueMode.STEER)
        steered.append(item_id)
        setup.coordination.steer(
            setup.session_id,
            QueryMessage(text="only the numbers", queue_item_id=item_id, extends_answer=True),
            epoch=_epoch(setup),
        )
        clock.advance(ABORT_POLL_MS)  # an answer takes a model a while
        return Say("The report says many things.")

    setup.rig.model.push(answer_while_steered, Say("3, 5 and 8."))
    assert setup.runner.run(setup.session_id).turns == 1
    assert _chain_texts(setup) == [["summarise the report", "only the numbers"]]
    (item,) = [i for i in _items(setup) if i.id == steered[0]]
    assert item.disposition == Disposition.INJECTED
    assert len(setup.rig.model.requests) == 2


def test_a_steer_during_an_answer_quicker_than_a_poll_interval_gets_the_next_turn(
    database: Database, clock: FakeClock
) -> None:
    """The inbox is not asked within a poll interval of the turn's start (a round trip
    saved on every quick turn): a steer that lands during an answer that quick stays
    queued and is answered by the next turn, not lost."""
    setup = _setup(database, clock)
    _enqueue(setup, "summarise the report")

    def answer_while_steered(request: object) -> Say:
        item_id = _enqueue(setup, "only the numbers", QueueMode.STEER)
        setup.coordination.steer(
            setup.session_id,
            QueryMessage(text="only the numbers", queue_item_id=item_id, extends_answer=True),
            epoch=_epoch(setup),
        )
        return Say("The report says many things.")

    setup.rig.model.push(answer_while_steered, Say("3, 5 and 8."))
    assert setup.runner.run(setup.session_id).turns == 2
    assert _chain_texts(setup) == [["summarise the report"], ["only the numbers"]]


def test_a_steer_backlog_message_waits_for_the_next_turn_instead(
    database: Database, clock: FakeClock
) -> None:
    setup = _setup(database, clock)
    _enqueue(setup, "summarise the report")

    def answer_while_steered(request: object) -> Say:
        item_id = _enqueue(setup, "and the dates", QueueMode.STEER_BACKLOG)
        setup.coordination.steer(
            setup.session_id,
            QueryMessage(text="and the dates", queue_item_id=item_id),
            epoch=_epoch(setup),
        )
        return Say("The report says many things.")

    setup.rig.model.push(answer_while_steered, Say("Dates: May."))
    assert setup.runner.run(setup.session_id).turns == 2
    assert _chain_texts(setup) == [["summarise the report"], ["and the dates"]]


def test_a_run_never_answers_past_an_input_another_run_still_holds(
    database: Database, clock: FakeClock
) -> None:
    """Redis flushed: two runs of one session step at once. The one whose lease vanished
    claims m1 between our first and second turn; we must not answer m2 ahead of it."""
    setup = _setup(database, clock)
    ids = [_enqueue(setup, f"m{n}") for n in range(3)]
    steps = 0

    class RacedRunner(SessionRunner):
        def _step(self, session_id: str, *, first: bool = False) -> tuple[str, bool]:
            nonlocal steps
            steps += 1
            if steps == 2:  # the other run claims the oldest input left
                with database.unit_of_work() as uow:
                    epoch = uow.ledger.sessions.claim(session_id)
                    uow.ledger.queue.claim_ids([ids[1]], epoch=epoch, lease_ms=60_000)
                    uow.commit()
            return super()._step(session_id, first=first)

    raced = RacedRunner(
        database=database,
        turns=setup.rig.turns,
        coordination=setup.coordination,
        doorbell=setup.doorbell,
        clock=clock,
    )
    assert raced.run(setup.session_id).turns == 1
    assert _chain_texts(setup) == [["m0"]]
    assert [i.status for i in _items(setup)] == [
        QueueStatus.DONE,
        QueueStatus.CLAIMED,
        QueueStatus.QUEUED,
    ]
    # The other run is fenced and hands m1 back: the next run answers m1, then m2.
    with database.unit_of_work() as uow:
        item = uow.ledger.queue.get(ids[1])
        assert item is not None and item.claimed_epoch is not None
        uow.ledger.queue.release([ids[1]], epoch=item.claimed_epoch)
        uow.commit()
    assert setup.runner.run(setup.session_id).turns == 2
    assert _chain_texts(setup) == [["m0"], ["m1"], ["m2"]]


def test_a_compaction_asked_for_during_a_turn_waits_for_it_and_runs_once(
    database: Database, clock: FakeClock
) -> None:
    """`nexus compact` / POST …/compact while a turn runs: the request is queued, the worker
    it rings finds the session's lease held, the running turn commits unsuperseded, and
    the same run then compacts — one answer, one summary, no attempt thrown away."""
    setup = _setup(database, clock)
    ring = RunOnRing(runner=setup.runner)
    _enqueue(setup, "remember the blue folder")
    asked: list[str] = []

    def answer_while_compaction_is_asked(request: object) -> Say:
        with database.unit_of_work() as uow:  # what the API's compact route does
            session = uow.ledger.sessions.get(setup.session_id)
            assert session is not None
            asked.append(request_compaction(uow, session, ring, instructions="keep colours"))
            uow.commit()  # rings after commit: another worker runs the session now
        return Say("noted: the blue folder")

    setup.rig.model.push(answer_while_compaction_is_asked)
    report = setup.runner.run(setup.session_id)
    assert ring.reports == ["busy"]  # the compaction did not run beside the turn
    assert (report.status, report.turns, report.failed) == ("done", 2, 0)
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(setup.session_id)
        assert session is not None and session.thread_id is not None
        chain = uow.ledger.threads.read_ancestry(session.thread_id)
        item = uow.ledger.queue.get(asked[0])
    assert [(v.turn.turn_type, v.turn.status) for v in chain] == [
        (TurnType.NORMAL, TurnStatus.COMPLETED),
        (TurnType.COMPACTION, TurnStatus.COMPLETED),
    ]
    assert chain[1].turn.parent_turn_id == chain[0].turn.id  # it compacted the answer
    assert item is not None and item.consumed_by_turn_id == chain[1].turn.id
    with database.engine.connect() as connection:
        every = connection.execute(
            text("SELECT status FROM turns WHERE session_id = :s"), {"s": setup.session_id}
        ).scalars()
        assert sorted(every) == ["completed", "completed"]  # nothing superseded or failed
    # Spent once: one answer and one summary, no repeated model call.
    assert [r.purpose for r in setup.rig.model.requests] == ["turn", "summary"]
    assert "keep colours" in setup.rig.model.requests[-1].system_text


@dataclass
class _CutOff(RecordingPublisher):
    """A stream publisher whose store stops answering once `cut` (a run's link to Redis
    cut): what a turn posts as it runs raises; `on_cut` runs first (another run taking
    over meanwhile, say)."""

    cut: bool = False
    on_cut: list[Callable[[], None]] = field(default_factory=list)

    def _unreachable(self) -> None:
        if self.cut:
            for action in self.on_cut:
                action()
            self.on_cut = []
            raise ConnectionError("Timeout reading from socket")

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        self._unreachable()
        super().post_many(events)

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        self._unreachable()
        super().publish_many(events)


def _cut_off_setup(database: Database, clock: FakeClock) -> tuple[Setup, _CutOff]:
    setup = _setup(database, clock)
    cut_off = _CutOff()
    turns = dataclasses.replace(setup.rig.turns, publisher=cut_off)
    setup.runner = dataclasses.replace(setup.runner, turns=turns)
    setup.rig.model.push(Say("never delivered"))
    return setup, cut_off


def _lost_attempts(database: Database) -> list[tuple[str, str, int]]:
    with database.unit_of_work() as uow:
        rows = uow.connection.exec_driver_sql(
            "SELECT status, error_kind, epoch FROM turns WHERE status = 'failed'"
        ).all()
    return [(row[0], row[1], row[2]) for row in rows]


def test_a_turn_that_loses_redis_mid_run_is_requeued_and_the_lost_attempt_recorded(
    database: Database, clock: FakeClock
) -> None:
    setup, cut_off = _cut_off_setup(database, clock)
    item_id = _enqueue(setup, "are you there?")
    cut_off.cut = True
    report = setup.runner.run(setup.session_id)
    assert report.failed == 1 and report.turns == 0
    [item] = _items(setup)
    assert item.id == item_id and item.status == QueueStatus.QUEUED and item.attempts == 1
    assert item.available_at > clock.now  # the retry's backoff
    assert _lost_attempts(database) == [("failed", "turn_crashed", _epoch(setup))]
    assert _chain_texts(setup) == []


def test_a_cut_off_turn_whose_claim_was_taken_over_records_nothing_more(
    database: Database, clock: FakeClock
) -> None:
    """Another run reclaimed the claim and claimed it again while this one was cut off
    (that run records the loss): the crash is fenced, it changes and records nothing."""
    setup, cut_off = _cut_off_setup(database, clock)
    item_id = _enqueue(setup, "are you there?")
    taken_at: list[int] = []

    def take_over() -> None:
        with database.unit_of_work() as uow:
            epoch = uow.ledger.sessions.claim(setup.session_id)
            uow.ledger.queue.reclaim(setup.session_id, max_attempts=3)
            uow.ledger.queue.claim_ids([item_id], epoch=epoch, lease_ms=10**9)
            uow.commit()
        taken_at.append(epoch)

    cut_off.on_cut = [take_over]
    cut_off.cut = True
    setup.runner.run(setup.session_id)
    [item] = _items(setup)
    assert item.status == QueueStatus.CLAIMED and item.claimed_epoch == taken_at[0]
    assert item.available_at <= clock.now  # no backoff set by the fenced run
    assert _lost_attempts(database) == []
