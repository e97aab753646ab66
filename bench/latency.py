"""Latency at low load: webhook POST → turn committed, one message at a time, beside a bare
Celery `apply_async().get()` round trip on the same broker and worker settings, and beside
the floor: the same hops written bare (`bench/floor_app.py`), so the report shows how much
of the time is the path's own shape and how much is Nexus.

The commit is observed where the runtime announces it: a blocking XREAD on the session's
Redis stream wakes on the `turn.committed` entry written right after the commit, so the
observer neither polls (no interval to add) nor loads the database.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from itertools import count
from typing import Any

import httpx
import redis
from sqlalchemy import text

from bench import harness
from bench.harness import poller
from bench.stacks import BareStack, FloorStack, NexusStack, bare_stack, floor_stack, nexus_stack

_numbers = count(5_000_000)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]

    return {
        "p50": statistics.median(ordered),
        "p95": at(0.95),
        "p99": at(0.99),
        "mean": statistics.fmean(ordered),
    }


def _committed(entries: Any) -> bool:
    for _key, items in entries or []:
        for _id, fields in items:
            if fields.get(b"type") == b"turn.committed":
                return True
    return False


def telegram_poster(http: httpx.Client) -> Callable[[], None]:
    """A call that POSTs the next Telegram message from sender 0 to Nexus's webhook."""

    def post() -> None:
        update = harness.telegram_update(next(_numbers), 0)
        http.post(
            "/v1/inbound/telegram", json=update, headers=harness.TELEGRAM_HEADERS
        ).raise_for_status()

    return post


def sender_stream(stack: NexusStack, post: Callable[[], None]) -> str:
    """`post()` a first message (it creates the sender's session), wait for its turn, and
    answer the session's Redis stream key, where each later turn announces its commit."""
    post()
    engine = poller(stack.url)
    harness.wait_for(
        lambda: harness.scalar(engine, "SELECT count(*) FROM turns") > 0,
        timeout=60,
        what="the first turn",
    )
    with engine.connect() as connection:
        session_id = connection.execute(
            text("SELECT id FROM sessions WHERE label LIKE 'dm:%'")
        ).scalar_one()
    engine.dispose()
    return f"{stack.prefix}stream:{session_id}"


def nexus_samples(stack: NexusStack, samples: int) -> list[float]:
    assert stack.api_url is not None
    with httpx.Client(base_url=stack.api_url, timeout=60) as http:
        post = telegram_poster(http)
        return timed_commits(post, sender_stream(stack, post), samples)


def timed_commits(post: Callable[[], object], key: str, samples: int) -> list[float]:
    """`samples` times (after five to warm up): `post()` a message, then wait on the Redis
    stream `key` for the `turn.committed` entry its turn writes; the milliseconds between."""
    client = redis.Redis.from_url(harness.REDIS_URL)
    found: list[float] = []
    for index in range(samples + 5):
        newest: Any = client.xrevrange(key, count=1)
        after = newest[0][0] if newest else "0-0"
        started = time.perf_counter()
        post()
        while True:
            entries: Any = client.xread({key: after}, block=30_000)
            if not entries:
                raise TimeoutError("no turn.committed within 30 s")
            if _committed(entries):
                break
            after = entries[0][1][-1][0]
        if index >= 5:
            found.append((time.perf_counter() - started) * 1000)
        time.sleep(0.02)  # low load: the system is idle when each message arrives
    client.close()
    return found


def floor_samples(stack: FloorStack, samples: int) -> list[float]:
    """The floor's webhook → its `turn.committed` entry, timed as Nexus's side is."""
    with httpx.Client(base_url=stack.api_url, timeout=60) as http:

        def post() -> None:
            update = harness.telegram_update(next(_numbers), 0)
            http.post("/hook", json=update, headers=stack.headers).raise_for_status()

        return timed_commits(post, stack.stream, samples)


def bare_samples(stack: BareStack, samples: int) -> list[float]:
    found: list[float] = []
    for index in range(samples + 5):
        started = time.perf_counter()
        stack.client.send_task("bare.ping").get(timeout=30)
        if index >= 5:
            found.append((time.perf_counter() - started) * 1000)
        time.sleep(0.02)
    return found


def run(*, quick: bool) -> dict[str, Any]:
    samples = 20 if quick else 200
    with (
        harness.scratch("latency") as work,
        nexus_stack(work) as nexus,
        bare_stack(work, senders=1) as bare,
        floor_stack(work) as floor,
    ):
        # Alternate halves so a noisy spell hits every side.
        nexus_ms, floor_ms, bare_ms = [], [], []
        for _ in range(2):
            nexus_ms += nexus_samples(nexus, samples // 2)
            floor_ms += floor_samples(floor, samples // 2)
            bare_ms += bare_samples(bare, samples // 2)
    nexus_p, floor_p, bare_p = percentiles(nexus_ms), percentiles(floor_ms), percentiles(bare_ms)
    return {
        "samples": len(nexus_ms),
        "nexus_ms": nexus_p,
        "floor_ms": floor_p,
        "round_trip_ms": bare_p,
        "ratio": nexus_p["p50"] / bare_p["p50"],
        "floor_ratio": floor_p["p50"] / bare_p["p50"],
        "observed_by": "blocking XREAD on the session's stream (turn.committed)",
    }


if __name__ == "__main__":
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
