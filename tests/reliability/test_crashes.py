"""Worker processes dying or pausing mid-turn and after commit, while messages keep coming."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.db import Database
from nexus.ledger.enums import Disposition, QueueMode, TurnStatus
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.session_support import (
    RUNS,
    Cluster,
    cluster,
    completed,
    on_fake_model,
    running_worker,
    user_texts,
)
from tests.integration.worker_process import celery_worker, wait_for
from tests.reliability.crash_worker import EXIT_CODE
from tests.reliability.scale import pick

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
BEHIND = pick(10, 50)  # messages queued behind the turn that is hit
UNCAPPED = {"NEXUS_QUEUE_CAP": "1000"}  # these scenarios are about crashes, not overflow


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def _slow_then_quick(fake: FakeAnthropicServer) -> None:
    fake.reply_text("a long answer that is cut short " * 5, chunks=20, delay_s=0.2)  # ~4 s
    for n in range(BEHIND + 2):
        fake.reply_text(f"answer {n}")


def _turns(database: Database, status: TurnStatus) -> list[tuple[str | None, str | None]]:
    with database.unit_of_work() as uow:
        rows = uow.connection.exec_driver_sql(
            "SELECT error_kind, error_message FROM turns WHERE status = %(status)s",
            {"status": status.value},
        ).all()
    return [(row[0], row[1]) for row in rows]


def _all_answered_in_order(nodes: Cluster, first: str, behind: list[str]) -> None:
    """One turn per message, in the order the router queued them (sent concurrently, they
    may be queued in any order; once queued, that order is the answer's)."""
    items = sorted(nodes.items(), key=lambda i: (i.enqueued_at, i.id))
    arrival = [str(i.event_id).removeprefix("telegram:") for i in items]
    assert arrival[0] == first and sorted(arrival[1:]) == sorted(behind)
    chain = nodes.chain()
    assert [user_texts(view) for view in chain] == [[text] for text in arrival]
    assert len(completed(chain)) == len(behind) + 1
    assert {i.disposition for i in items} == {Disposition.CONSUMED}


def test_kill_9_mid_turn_under_load_answers_everything_once(
    watched_db: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    _slow_then_quick(fake)
    behind = [f"k{n:02d}" for n in range(BEHIND)]
    with cluster(
        watched_db,
        tmp_path,
        mode=QueueMode.QUEUE,
        workers=2,
        beat=True,
        # A 4 s lease, not the cluster's 2 s: on a loaded machine a live run's keep-alive
        # (every third of the lease) can miss 2 s, and a takeover of a live run records a
        # `worker_lost` and counts an attempt until that run comes back fenced and gives
        # it back; this scenario counts both.
        extra_env={**on_fake_model(fake), **UNCAPPED, "NEXUS_SESSION_LEASE_MS": "4000"},
    ) as nodes:
        nodes.send(["first"])
        wait_for(lambda: len(fake.requests) == 1, what="the slow turn to start")
        victim = running_worker(nodes)
        nodes.send(behind, concurrency=4)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
        # The survivor takes over once the dead run's lease lapses and the relay (beat) or
        # the watchdog rings; it reclaims the dead run's claim and answers everything, in
        # order.
        wait_for(lambda: nodes.settled(BEHIND + 1), timeout=120, what="every message answered")
        _all_answered_in_order(nodes, "first", behind)
        first = next(i for i in nodes.items() if i.event_id == "telegram:first")
    assert first.attempts == 2
    lost = _turns(watched_db, TurnStatus.FAILED)
    assert [kind for kind, _ in lost] == ["worker_lost"]


def test_sigstop_past_the_lease_fences_the_paused_run(
    watched_db: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    _slow_then_quick(fake)
    behind = [f"s{n:02d}" for n in range(BEHIND)]
    with cluster(
        watched_db,
        tmp_path,
        mode=QueueMode.QUEUE,
        workers=2,
        beat=True,
        extra_env={**on_fake_model(fake), **UNCAPPED},
    ) as nodes:
        nodes.send(["first"])
        wait_for(lambda: len(fake.requests) == 1, what="the slow turn to start")
        paused = running_worker(nodes)
        os.kill(paused.pid, signal.SIGSTOP)
        try:
            nodes.send(behind, concurrency=4)
            time.sleep(3.0)  # past the 2 s lease: the keep-alive is paused too
            wait_for(lambda: len(fake.requests) >= 2, timeout=30, what="another worker's run")
        finally:
            os.kill(paused.pid, signal.SIGCONT)
        wait_for(lambda: "run_fenced" in nodes.log_text(), timeout=60, what="the fence")
        wait_for(lambda: nodes.settled(BEHIND + 1), timeout=120, what="every message answered")
        _all_answered_in_order(nodes, "first", behind)
    assert nodes.chain()[0].messages[-1].content["text"] != "a long answer that is cut short"
    # The taker-over recorded the paused run's claim as lost; the paused run, woken, found
    # its epoch gone and kept its answer as a superseded attempt, off the chain.
    assert [kind for kind, _ in _turns(watched_db, TurnStatus.FAILED)] == ["worker_lost"]
    assert len(_turns(watched_db, TurnStatus.SUPERSEDED)) == 1


def test_a_crash_after_commit_before_ack_is_answered_once_after_redelivery(
    watched_db: Database, tmp_path: Path
) -> None:
    """The worker commits a turn and dies before Celery acks the task; the broker hands the
    task out again (visibility timeout 3 s) to a fresh worker, which must change nothing."""
    quick_redelivery = {"NEXUS_VISIBILITY_TIMEOUT_SECONDS": "3"}
    with cluster(
        watched_db,
        tmp_path,
        mode=QueueMode.QUEUE,
        worker_app="tests.reliability.crash_worker",
        extra_env=quick_redelivery,
    ) as nodes:
        nodes.send(["before the crash"])
        crashed = nodes.workers[0]
        assert crashed.wait(timeout=60) == EXIT_CODE, nodes.log_text()
        crashed_at = time.monotonic()
        log = nodes.logs[0].read_text()
        assert "crash_after_commit" in log
        # The turn ran in a session run, or inline in the router run that queued it.
        task = re.findall(rf"Task {RUNS}\[([0-9a-f-]+)\] received", log)[-1]
        assert f"{task}] succeeded" not in log  # it never finished, so it was never acked
        assert nodes.settled(1)  # committed before the crash: answered, and only once
        nodes.send(["after the crash"])
        time.sleep(max(0.0, crashed_at + 3.5 - time.monotonic()))  # the task is visible again
        fresh = tmp_path / "fresh.log"
        with celery_worker(nodes.environment, fresh, queues="events,sessions", threads=4):
            wait_for(lambda: nodes.settled(2), timeout=60, what="the second message")
            wait_for(
                lambda: f"[{task}] succeeded" in fresh.read_text(),
                timeout=30,
                what="the redelivered task",
            )
        chain = nodes.chain()
        items = nodes.items()
    assert [user_texts(view) for view in chain] == [["before the crash"], ["after the crash"]]
    assert all(i.attempts == 1 and i.disposition == Disposition.CONSUMED for i in items)
    assert _turns(watched_db, TurnStatus.FAILED) == []
    assert _turns(watched_db, TurnStatus.SUPERSEDED) == []


def test_kill_9_of_the_lease_holder_with_no_beat_is_answered_once_within_the_lease(
    watched_db: Database, tmp_path: Path, fake: FakeAnthropicServer
) -> None:
    """No timer runs: the dead run's task, handed out again by its worker's parent, finds
    the lease still held, and must come back for the session once the lease has lapsed."""
    fake.reply_text("a long answer that is cut short " * 5, chunks=20, delay_s=0.2)  # ~4 s
    fake.reply_text("the answer after the crash")
    with cluster(
        watched_db,
        tmp_path,
        mode=QueueMode.QUEUE,
        workers=2,
        beat=False,
        extra_env=on_fake_model(fake),
    ) as nodes:
        nodes.send(["only"])
        wait_for(lambda: len(fake.requests) == 1, what="the slow turn to start")
        victim = running_worker(nodes)
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        victim.wait(timeout=10)
        lease_s = 2.0  # the cluster's NEXUS_SESSION_LEASE_MS
        wait_for(lambda: nodes.settled(1), timeout=lease_s + 15, what="the answer")
        assert time.monotonic() - killed_at <= lease_s + 15
        [item] = nodes.items()
        chain = nodes.chain()
    assert item.disposition == Disposition.CONSUMED and item.attempts == 2
    assert [user_texts(view) for view in completed(chain)] == [["only"]]
    assert chain[-1].messages[-1].content["text"] == "the answer after the crash"
    assert [kind for kind, _ in _turns(watched_db, TurnStatus.FAILED)] == ["worker_lost"]
