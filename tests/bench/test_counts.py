"""The hot path's cost per event, guarded by counts (statements, transactions, Redis round
trips, statement compilations), not by times: `python -m bench.counts` on the real Postgres
and Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.services import PG_ADMIN_URL, REDIS_URL

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[2]

# Per event when messages arrive in a burst: API, router and session run together.
BURST_CEILINGS = {"sql": 8.0, "commits": 2.0, "redis": 6.0}
# Per event one at a time (no burst to share the costs): what it costs today (from 36 statements, 4
# transactions and 21 round trips, then 31 / 4 / 19, then 19 / 4 / 17: now API 1, router 3, session
# run 5.2 statements, since a worker knows the turn it committed and reads a turn committed
# elsewhere with its messages in one statement, a reply is addressed from the event the run read
# rather than read back and stored with its one chunk in one statement, and the router reads who
# sent the waiting events with its claim of them, and the webhook touches a known sender's contact
# in the statement that stores the event, and a router run of one event locks its session with the
# read that resolves it and counts the queue for the cap with the enqueue, which also writes the
# batch's events' dispositions, and a run's claim reads the snapshot its turn needs; 11 round trips
# since a commit's stream events and a delta's progress share one publish each, a turn's
# session.started rides with its first publish, a model call's step.generated rides with the publish
# after it, and the abort flag and steer inbox are first asked a poll interval after the claim, the
# question whether a steer waits for the answer included), so a change that adds a statement or a
# round trip to the path fails here and says where. 12 round trips since a turn posts
# `turn.completing` before its commit, so watchers see the commit phase (`running.step`
# "completing"): posted, not waited for, and the model call's held `step.generated` rides with it.
# One statement more per turn: a committed turn keeps its stream events in the ledger
# (docs/operations.md, "Session events") with one multi-row INSERT in its commit's transaction, no
# transaction and no Redis round trip more; the sequences come from the statement itself.
# The reply is counted since it leaves with its turn (nexus/outbound/inline.py): the session run
# sends it to the bench's fake Telegram, and a stage of its own runs the delivery task on the ring
# the commit left (still rung, as the backup). Measured on both sides of the change, the stages
# summed: the task alone sent it for 4 statements, 2 transactions and 1.125 round trips (read,
# take, record, read the next chunk; the rate slot), 14.2 / 6 / 13.125 in all; the run sends it
# for 2, 2 and 1 (take, record; the rate slot: the reply's chunks come from its commit) and the
# backup task reads one row and finds it sent, 13.2 / 6 / 13 in all.
SINGLE_CEILINGS = {"sql": 13.5, "commits": 6.0, "redis": 13.0}
# One at a time as deployed (the router runs the turn inline): the webhook's transaction,
# routing with the inline session's first claim, and the turn's; no abort raised for the
# session the router claimed, and its queue.item.queued sent with the turn's first publish;
# the claim takes the router's item without reading the queue when it is all there is, and
# reads the session's snapshot in the same statement. One round trip more than it was: the
# turn's posted `turn.completing`; one statement more: the turn's kept stream events (see
# SINGLE_CEILINGS). Two statements, two transactions and one round trip more: the turn's reply,
# sent by the run (see SINGLE_CEILINGS), in place of the delivery task's four statements, two
# transactions and one round trip, which this count never included; the backup task's one read
# is not counted here either.
DEPLOYED_CEILINGS = {"sql": 11.0, "commits": 5.0, "redis": 11.0}

# SQLAlchemy compilations per event, one at a time (the stages summed, and as deployed): every
# event is a turn there, so a statement compiled per call counts 1 or more. The hot path's
# statements are built once and compiled on first use; what the warm-up did not use yet is
# compiled once in the run (three statements, 3 of 40 events: a turn's first read of a
# session's chain and its messages, a delivery's first read by the backup task), none per
# event. A turn's kept stream events compiled a multi-row INSERT per commit (1.075 summed,
# 1.0 as deployed) until the append was one statement built once (0.075, 0.0). Not guarded
# at burst, where a turn answers many events and a per-turn compile counts ~0.1.
COMPILES_CEILING = 0.25


@pytest.fixture(scope="module")
def counts() -> dict[str, Any]:
    ran = subprocess.run(
        [sys.executable, "-m", "bench.counts"],
        cwd=ROOT,
        env={
            **os.environ,
            "NEXUS_BENCH_POSTGRES_URL": PG_ADMIN_URL,
            "NEXUS_BENCH_REDIS_URL": REDIS_URL,
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    found: dict[str, Any] = json.loads(ran.stdout)
    return found


def test_a_burst_costs_at_most_the_ceilings_per_event(counts: dict[str, Any]) -> None:
    burst = counts["burst"]
    over = {k: burst.get(k, 0.0) for k, most in BURST_CEILINGS.items() if burst.get(k, 0.0) > most}
    assert not over, f"per event at burst: {burst} (ceilings {BURST_CEILINGS})"


def test_one_event_at_a_time_costs_no_more_than_it_did(counts: dict[str, Any]) -> None:
    stages = counts["nexus"]
    total = {key: sum(stage.get(key, 0.0) for stage in stages.values()) for key in SINGLE_CEILINGS}
    over = {k: v for k, v in total.items() if v > SINGLE_CEILINGS[k]}
    assert not over, f"per event, one at a time: {stages} (ceilings {SINGLE_CEILINGS})"


def test_a_message_answered_inline_costs_three_transactions(counts: dict[str, Any]) -> None:
    deployed = counts["deployed"]
    over = {k: v for k, v in deployed.items() if v > DEPLOYED_CEILINGS.get(k, float("inf"))}
    assert not over, f"per event as deployed: {deployed} (ceilings {DEPLOYED_CEILINGS})"


def test_the_hot_path_compiles_no_statement_per_event(counts: dict[str, Any]) -> None:
    stages, deployed = counts["nexus"], counts["deployed"]
    summed = sum(stage.get("compiles", 0.0) for stage in stages.values())
    found = {"stages summed": summed, "deployed": deployed.get("compiles", 0.0)}
    over = {k: v for k, v in found.items() if v > COMPILES_CEILING}
    assert not over, (
        f"compilations per event: {found} (ceiling {COMPILES_CEILING}); compiled while "
        f"measured: {json.dumps(counts['compiled'], indent=1)}"
    )
