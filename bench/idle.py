"""What an idle session costs: its Redis keys, and the watchdog's and the relay's ticks.

- Redis memory per idle session once every turn is answered: `MEMORY USAGE` of every key
  under a deployment's prefix naming a session id, over the sessions, with each kind of key
  (the id replaced by `{session}`), whether it expires and its longest TTL. Two figures: at
  once (within the replay window, the streams still there for a reconnect) and past the
  window (the keys whose TTL outlives it: what an idle session costs from then on, read
  from the TTLs rather than waited for). `INFO memory`'s `used_memory` is beside it,
  indicative only: the Redis is shared;
- the watchdog's look (`ring_orphaned` + `relay_hooks`, as a worker's watchdog thread runs
  them) and the relay (`relay`, as each timer tick runs it): SQL statements and Redis round
  trips per tick (counted as `bench.counts` counts them) and milliseconds, in a process of
  their own built as a worker builds its graph (`python -m bench.idle`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import redis

from bench import harness
from bench.stacks import NexusStack
from nexus.queueing.stream_expiry import STREAM_REPLAY_WINDOW_S

TICKS = 7  # looks timed per tick kind (the first, warming, not counted)


@dataclass(frozen=True)
class KeyUse:
    """One key under a prefix: its name after the prefix, the session it names (None: a key
    of no session's, such as the broker's), its kind (the name with that session's id as
    `{session}`), its `MEMORY USAGE` in bytes and its TTL in seconds (-1: it never expires)."""

    name: str
    session: str | None
    kind: str
    used: int
    ttl: int


def key_uses(client: redis.Redis, prefix: str, session_ids: Collection[str]) -> list[KeyUse]:
    """Every key under `prefix`, with its memory and TTL read in one pipeline; a key gone
    (expired, a lease released) between the scan and the read is left out."""
    ids = set(session_ids)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.memory_usage(key, samples=0)
            pipe.ttl(key)
        answers = pipe.execute()
    found: list[KeyUse] = []
    for key, used, ttl in zip(keys, answers[0::2], answers[1::2], strict=True):
        if used is None:
            continue
        name = key.decode()[len(prefix) :]
        session = next((part for part in name.replace("/", ":").split(":") if part in ids), None)
        kind = name if session is None else name.replace(session, "{session}")
        found.append(KeyUse(name, session, kind, int(used), int(ttl)))
    return found


def redis_per_session(prefix: str, session_ids: list[str]) -> dict[str, Any]:
    """`MEMORY USAGE` of the keys under `prefix`: those naming a session (per session, and
    by kind; all of them, and those outliving the stream's replay window), and the rest
    (the broker's, shared by all sessions)."""
    client = redis.Redis.from_url(harness.REDIS_URL)
    kinds: dict[str, Counter[str]] = {}
    per_session = past_window = other = 0
    keys = key_uses(client, prefix, session_ids)
    for key in keys:
        if key.session is None:
            other += key.used
            continue
        per_session += key.used
        outlives = key.ttl == -1 or key.ttl > STREAM_REPLAY_WINDOW_S
        past_window += key.used * outlives
        counted = kinds.setdefault(key.kind, Counter())
        counted["keys"] += 1
        counted["bytes"] += key.used
        counted["bytes_past_window"] += key.used * outlives
        counted["without_expiry"] += int(key.ttl == -1)
        counted["ttl_max_s"] = max(counted["ttl_max_s"], key.ttl)
    entries = [client.xlen(prefix + k.name) for k in keys if k.name.startswith("stream:")]
    client.close()
    sessions = max(1, len(session_ids))
    return {
        "sessions": len(session_ids),
        "bytes_per_session": per_session / sessions,
        "replay_window_s": STREAM_REPLAY_WINDOW_S,
        "bytes_per_session_past_window": past_window / sessions,
        "shared_bytes": other,
        "keys_per_session": sum(c["keys"] for c in kinds.values()) / sessions,
        "entries_per_stream": statistics.fmean(entries) if entries else 0.0,
        "kinds": {
            kind: {
                "keys": c["keys"],
                "bytes_per_key": c["bytes"] / c["keys"],
                "bytes_past_window_per_key": c["bytes_past_window"] / c["keys"],
                "without_expiry": c["without_expiry"],
                "ttl_max_s": c["ttl_max_s"],
            }
            for kind, c in sorted(kinds.items())
        },
    }


def used_memory() -> int:
    client = redis.Redis.from_url(harness.REDIS_URL)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


def tick_costs(stack: NexusStack) -> dict[str, Any]:
    """The watchdog's look and the relay, counted in a process of their own (this module,
    run as `python -m bench.idle`)."""
    env = {**stack.env, "NEXUS_LOG_LEVEL": "WARNING", "PYTHONPATH": str(harness.ROOT)}
    # The counting process talks to Postgres and Redis straight, as `bench.counts` does.
    env["NEXUS_DATABASE_URL"], env["NEXUS_REDIS_URL"] = stack.url, harness.REDIS_URL
    ran = subprocess.run(
        [sys.executable, "-m", "bench.idle"],
        cwd=harness.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    return found


def _ticks() -> dict[str, Any]:
    """In a process configured by NEXUS_*: count one watchdog look and one relay, idle."""
    from bench.counts import counting
    from nexus.ingest.relay import relay, relay_hooks
    from nexus.sessions.watchdog import ring_orphaned
    from workers import tasks

    runtime = tasks._runtime()
    every_ms = int(runtime.settings.watchdog_seconds * 1000) or 5_000

    def watchdog() -> None:
        ring_orphaned(runtime.database, runtime.coordination, runtime.doorbell, grace_ms=every_ms)
        with runtime.database.unit_of_work() as uow:
            relay_hooks(uow, runtime.doorbell, flags=runtime.coordination)

    def relay_tick() -> None:
        with runtime.database.unit_of_work() as uow:
            relay(uow, runtime.doorbell, flags=runtime.coordination)

    out: dict[str, Any] = {}
    for name, look in (("watchdog", watchdog), ("relay", relay_tick)):
        totals: Counter[str] = Counter()
        times = []
        for index in range(TICKS):
            with counting(runtime.database.engine) as counts:
                started = time.perf_counter()
                look()
                elapsed = (time.perf_counter() - started) * 1000
            if index:
                totals.update(counts)
                times.append(elapsed)
        out[name] = {
            "sql_per_tick": totals["sql"] / (TICKS - 1),
            "redis_per_tick": totals["redis"] / (TICKS - 1),
            "ms_per_tick": statistics.median(times),
        }
    runtime.close()
    return out


if __name__ == "__main__":
    os.environ.setdefault("NEXUS_LOG_LEVEL", "WARNING")
    print(json.dumps(_ticks()))
