"""The session runtime on real worker processes, Postgres and Redis."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
import redis

from nexus.access.policy import load_policies
from nexus.agents.posting import post
from nexus.arrival.settings import QueuePolicy
from nexus.db import Database
from nexus.ingest.batch import route_waiting
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus
from nexus.ledger.records import QueueItemRecord
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.session_support import (
    RUNS,
    cluster,
    completed,
    on_fake_model,
    user_texts,
)
from tests.integration.worker_process import celery_worker, wait_for
from tests.services import REDIS_URL

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def test_300_concurrent_messages_make_one_linear_chain_in_arrival_order(
    pg_database: Database, tmp_path: Path
) -> None:
    texts = [f"m{n:03d}" for n in range(300)]
    uncapped = {"NEXUS_QUEUE_CAP": "1000"}  # this test is about order, not overflow
    with cluster(
        pg_database, tmp_path, mode=QueueMode.QUEUE, workers=2, extra_env=uncapped
    ) as nodes:
        nodes.send(texts, concurrency=16)
        wait_for(lambda: nodes.settled(300), timeout=240, what="300 turns")
        items = nodes.items()
        chain = nodes.chain()
    assert len(items) == 300 and {i.disposition for i in items} == {Disposition.CONSUMED}
    assert len(chain) == 300  # every turn on one chain: nothing forked, nothing lost
    for parent, child in pairwise(chain):
        assert child.turn.parent_turn_id == parent.turn.id
    # Arrival order is the order the router queued them; the chain answers in that order.
    arrival = [i.event_id for i in sorted(items, key=lambda i: (i.enqueued_at, i.id))]
    answered = [f"telegram:{user_texts(view)[0]}" for view in chain]
    assert answered == arrival
    assert len({i.consumed_by_turn_id for i in items}) == 300
    # One turn at a time: no two turns' run intervals overlap.
    for earlier, later in pairwise(chain):
        assert earlier.turn.completed_at is not None
        assert earlier.turn.completed_at <= later.turn.started_at
    both = [path.read_text().count("turn_committed") for path in nodes.logs]
    assert sum(both) == 300, f"turns per worker: {both}"
    # Both workers contended for the session: each was handed runs (a router's or a
    # session's). Which of them commits the turns is the lease's business: a run answers
    # the backlog back to back, so one worker may commit all 300 while the other's rings
    # find the session busy.
    handed = [len(re.findall(rf"Task {RUNS}\[", path.read_text())) for path in nodes.logs]
    assert min(handed) > 0, f"runs handed to each worker: {handed}"


def test_collect_turns_20_messages_during_a_slow_turn_into_one(
    pg_database: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.reply_text("a slow answer " * 10, chunks=20, delay_s=0.15)  # ~3 s
    fake.reply_text("all twenty, answered together")
    with cluster(
        pg_database, tmp_path, mode=QueueMode.COLLECT, extra_env=on_fake_model(fake)
    ) as nodes:
        nodes.send(["first"])
        wait_for(lambda: len(fake.requests) == 1, what="the slow turn to start")
        nodes.send([f"c{n:02d}" for n in range(20)])
        wait_for(lambda: nodes.settled(21), timeout=30, what="both turns")
        chain = nodes.chain()
    assert len(fake.requests) == 2
    later = [i for i in nodes.items() if i.event_id != "telegram:first"]
    assert {i.disposition for i in later} == {Disposition.BATCHED}
    # Four router threads may queue two messages in either order; the batch keeps the
    # order in which they were queued, as every other mode does.
    arrival = [str(i.event_id).removeprefix("telegram:") for i in sorted(later, key=_queue_order)]
    assert sorted(arrival) == [f"c{n:02d}" for n in range(20)]
    assert [user_texts(view) for view in chain] == [["first"], arrival]


def _queue_order(item: QueueItemRecord) -> tuple[int, str]:
    return (item.enqueued_at, item.id)


def test_an_interrupt_aborts_a_streaming_turn_within_a_second(
    pg_database: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.reply_text("word " * 50, chunks=50, delay_s=0.1)  # a 5-second stream
    fake.reply_text("sure, the new question then")
    with cluster(
        pg_database, tmp_path, mode=QueueMode.INTERRUPT, extra_env=on_fake_model(fake)
    ) as nodes:
        nodes.send(["tell me everything"])
        wait_for(lambda: len(fake.requests) == 1, what="the stream to start")
        # A backlog: a worker's update queued behind the running turn (followup waits).
        with pg_database.unit_of_work() as uow:
            post(uow, None, session_id=nodes.session_id, event_id="agent:update",
                 text="worker says: half done", payload={"kind": "message"})  # fmt: skip
            uow.commit()
        time.sleep(1.0)
        sent_at = time.time() * 1000
        nodes.send(["actually, something else"])
        wait_for(lambda: nodes.settled(3), timeout=30, what="every input answered")
        chain = nodes.chain()
        items = {i.event_id: i for i in nodes.items()}
    aborted, answered = chain
    assert items["agent:update"].disposition == Disposition.BATCHED
    assert items["agent:update"].consumed_by_turn_id == answered.turn.id
    assert aborted.turn.status.value == "aborted"
    assert aborted.turn.completed_at is not None
    assert aborted.turn.completed_at - sent_at < 1_000, "abort took longer than a second"
    partial = aborted.messages[-1].content
    assert partial.get("partial") is True and partial["text"].startswith("word")
    # One queue_batch turn: the backlog and the interrupting message together.
    assert user_texts(answered) == ["worker says: half done", "actually, something else"]
    assert answered.turn.status.value == "completed"


def test_a_steer_joins_the_tool_using_turn_before_its_next_model_call(
    pg_database: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    # The tool call streams slowly (~1.5 s), so the steer arrives while it is under way.
    fake.reply_tool_use("current_time", {"timezone": "UTC"}, text="Checking", delay_s=0.15)
    fake.reply_text("Done, and in French as you asked.")
    with cluster(
        pg_database,
        tmp_path,
        mode=QueueMode.STEER,
        extra_env=on_fake_model(fake),
        capabilities=("current_time",),
    ) as nodes:
        nodes.send(["what time is it?"])
        wait_for(lambda: len(fake.requests) >= 1, what="the first model call")
        nodes.send(["answer in French"])
        wait_for(lambda: nodes.settled(2), timeout=30, what="the steer to be consumed")
        chain = nodes.chain()
        items = {i.event_id: i for i in nodes.items()}
    assert len(chain) == 1, "the steer must not become a turn of its own"
    (turn,) = chain
    assert user_texts(turn) == ["what time is it?", "answer in French"]
    assert items["telegram:answer in French"].disposition == Disposition.INJECTED
    second_call = fake.requests[1].body["messages"][-1]["content"]
    assert second_call[0]["type"] == "tool_result"
    assert any(block.get("text") == "answer in French" for block in second_call)


def test_kill_9_mid_turn_is_answered_once_after_a_restart(
    pg_database: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.reply_text("this answer never finishes " * 20, chunks=40, delay_s=0.25)
    fake.reply_text("answered after the restart")
    with cluster(
        pg_database, tmp_path, mode=QueueMode.QUEUE, extra_env=on_fake_model(fake)
    ) as nodes:
        nodes.send(["are you there?"])
        wait_for(lambda: len(fake.requests) == 1, what="the turn to start")
        os.kill(nodes.workers[0].pid, signal.SIGKILL)
        nodes.workers[0].wait(timeout=10)
        time.sleep(2.5)  # the dead run's lease (2 s) expires
        with celery_worker(
            nodes.environment, tmp_path / "restarted.log", queues="events,sessions", threads=4
        ):
            wait_for(lambda: nodes.settled(1), timeout=30, what="the answer after restart")
        chain = nodes.chain()
        (item,) = nodes.items()
    assert [user_texts(v) for v in chain] == [["are you there?"]]
    assert chain[0].messages[-1].content["text"] == "answered after the restart"
    assert item.disposition == Disposition.CONSUMED and item.attempts == 2
    with pg_database.unit_of_work() as uow:
        lost = (
            uow.connection.exec_driver_sql(
                "SELECT status FROM turns WHERE error_kind = 'worker_lost'"
            )
            .scalars()
            .all()
        )
        forks = uow.connection.exec_driver_sql(
            "SELECT parent_turn_id, count(*) FROM threads GROUP BY parent_turn_id "
            "HAVING count(*) > 1"
        ).all()
    assert lost == ["failed"] and forks == []


def test_flushall_with_50_pending_loses_nothing(pg_database: Database, tmp_path: Path) -> None:
    uncapped = {"NEXUS_QUEUE_CAP": "1000"}
    with cluster(
        pg_database, tmp_path, mode=QueueMode.QUEUE, workers=0, extra_env=uncapped
    ) as nodes:
        nodes.send([f"p{n:02d}" for n in range(50)], concurrency=8)  # rung into no worker
        # Half of them routed already: 25 queue items whose session was never rung, and
        # 25 events still waiting for the router. The relay owes both kinds a ring.
        policies, no_cap = load_policies(None), QueuePolicy(cap=1000)
        with pg_database.unit_of_work() as uow:
            # The router's live path, told to take 25: it routes every waiting event it
            # claims, so one call per event would route all 50. Nothing is rung.
            route_waiting(uow, policies, queueing=no_cap, limit=25)
            uow.commit()
        assert len(nodes.items()) == 25
        redis.Redis.from_url(REDIS_URL).flushdb()  # every doorbell gone (this run's database)
        with celery_worker(
            nodes.environment, tmp_path / "after-flush.log", queues="events,sessions"
        ):
            wait_for(lambda: nodes.settled(50), timeout=60, what="all 50 after the relay")
        items = nodes.items()
        chain = nodes.chain()
    assert len(items) == 50 and {i.disposition for i in items} == {Disposition.CONSUMED}
    assert len(chain) == 50 and len({i.consumed_by_turn_id for i in items}) == 50


def test_a_paused_lease_holder_is_fenced_and_the_chain_stays_linear(
    pg_database: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.reply_text("slow answer from the paused worker " * 5, chunks=10, delay_s=0.3)
    fake.reply_text("answer from the other worker")
    with cluster(
        pg_database, tmp_path, mode=QueueMode.QUEUE, workers=2, extra_env=on_fake_model(fake)
    ) as nodes:
        nodes.send(["hello?"])
        wait_for(lambda: len(fake.requests) == 1, what="the first turn to start")
        holder = next(
            worker
            for worker, log in zip(nodes.workers, nodes.logs, strict=True)
            # The turn runs in a session run, or inline in the router run that queued it.
            if re.search(rf"Task {RUNS}\[", log.read_text())
        )
        os.kill(holder.pid, signal.SIGSTOP)
        time.sleep(3.0)  # past the 2 s lease
        nodes.doorbell.session_has_work(nodes.session_id)  # what the relay would do
        wait_for(lambda: nodes.settled(1), timeout=30, what="the other worker's answer")
        os.kill(holder.pid, signal.SIGCONT)
        wait_for(lambda: "run_fenced" in nodes.log_text(), timeout=30, what="the fence")
        chain = nodes.chain()
        (item,) = nodes.items()
    assert [v.messages[-1].content["text"] for v in chain] == ["answer from the other worker"]
    assert len(completed(chain)) == 1
    # The paused run was alive: fenced, it gave back the attempt its claim counted, so the
    # takeover spent none of the message's attempts.
    assert item.disposition == Disposition.CONSUMED and item.attempts == 1
    with pg_database.unit_of_work() as uow:
        attempts = uow.connection.exec_driver_sql(
            "SELECT status, error_kind FROM turns WHERE status IN ('superseded', 'failed') "
            "ORDER BY started_at"
        ).all()
    # The other worker recorded the paused run's claim as lost; the paused run, woken,
    # found itself fenced and kept its finished answer as a superseded attempt.
    assert sorted(tuple(a) for a in attempts) == [
        ("failed", "worker_lost"),
        ("superseded", None),
    ]


def test_25_messages_over_a_cap_of_20_drop_5_with_one_notice(
    pg_database: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    fake.reply_text("a slow first answer " * 5, chunks=10, delay_s=0.3)  # ~3 s
    for n in range(20):
        fake.reply_text(f"answer {n}")
    with cluster(
        pg_database, tmp_path, mode=QueueMode.QUEUE, extra_env=on_fake_model(fake)
    ) as nodes:
        nodes.send(["first"])
        wait_for(lambda: len(fake.requests) == 1, what="the slow turn to start")
        nodes.send([f"q{n:02d}" for n in range(25)], concurrency=8)  # four routers race
        open_ = (QueueStatus.QUEUED, QueueStatus.CLAIMED)
        wait_for(
            lambda: len(nodes.items()) == 26 and all(i.status not in open_ for i in nodes.items()),
            timeout=90,
            what="every input settled",
        )
        items = nodes.items()
        chain = nodes.chain()
        with pg_database.unit_of_work() as uow:
            notices = (
                uow.connection.exec_driver_sql("SELECT text FROM events WHERE kind = 'notice'")
                .scalars()
                .all()
            )
    dropped = [i for i in items if i.disposition == Disposition.DROPPED]
    assert len(dropped) == 5, [i.disposition for i in items]
    assert len([i for i in items if i.disposition == Disposition.CONSUMED]) == 21
    assert len(completed(chain)) == 21
    [notice] = notices  # summarize: one notice for the whole overflow
    assert notice.startswith("5 of your earlier messages were not answered")
