"""What `nexus status` calls wrong (nexus/operations/status.py), decided from the facts."""

from __future__ import annotations

from dataclasses import replace

from nexus.operations.status import BEAT_STALE_MS, Facts, problems

NOW = 1_700_000_000_000
HEALTHY = Facts(
    now_ms=NOW,
    workers=["celery@w1"],
    workers_error=None,
    last_tick_at=NOW - 30_000,
    maxmemory_policy="noeviction",
    redis_error=None,
)


def test_a_healthy_deployment_has_no_problems() -> None:
    assert problems(HEALTHY) == []
    assert problems(replace(HEALTHY, maxmemory_policy=None)) == []  # embedded: no Redis


def test_no_worker_answering_is_a_problem_and_so_is_an_unreachable_broker() -> None:
    [none] = problems(replace(HEALTHY, workers=[]))
    assert "no worker answered" in none
    [unreachable] = problems(replace(HEALTHY, workers=None, workers_error="OSError: refused"))
    assert "cannot ask the workers: OSError: refused" in unreachable


def test_a_stale_or_missing_tick_is_a_problem() -> None:
    assert problems(replace(HEALTHY, last_tick_at=NOW - BEAT_STALE_MS)) == []  # just in time
    [stale] = problems(replace(HEALTHY, last_tick_at=NOW - BEAT_STALE_MS - 1_000))
    assert "last ticked 181 s ago" in stale and "nexus beat" in stale
    [never] = problems(replace(HEALTHY, last_tick_at=None))
    assert "never ticked" in never


def test_an_evicting_redis_is_a_problem() -> None:
    [evicting] = problems(replace(HEALTHY, maxmemory_policy="allkeys-lru"))
    assert "'allkeys-lru'" in evicting and "noeviction" in evicting
    [away] = problems(replace(HEALTHY, redis_error="unreachable (ConnectionError)"))
    assert away.startswith("Redis: unreachable")
