"""Many sessions: the same messages spread over 10,000 sessions against 100, and what an
idle session costs afterwards.

Each side is a fresh Nexus (`nexus api` + `nexus worker`, its own database and Redis
prefix). Every session gets one message first (it creates the session; not timed), then
the timed messages, round-robin over the sessions from 16 senders: 10,000 sessions × 2
against 100 × 200 (`--quick`: 1,000 × 2 against 100 × 20). Measured on each side:

- events/s from the first timed POST until every queue item is settled, and each event's
  latency from its `received_at` to its queue item's settlement (p50, p99; milliseconds as
  the ledger stamps them);
- Redis memory per idle session once every turn is answered: `MEMORY USAGE` of every key
  under the side's prefix naming a session id, over the sessions, with each kind of key
  (the id replaced by `{session}`), whether it expires and its longest TTL. Two figures: at
  once (within the replay window, the streams still there for a reconnect) and past the
  window (the keys whose TTL outlives it: what an idle session costs from then on, read
  from the TTLs rather than waited for). `INFO memory`'s `used_memory` change is beside
  it, indicative only: the Redis is shared;
- the watchdog's look (`ring_orphaned` + `relay_hooks`, as a worker's watchdog thread runs
  them) and the relay (`relay`, as each timer tick runs it) with every session idle: SQL
  statements and Redis round trips per tick (counted as `bench.counts` counts them) and
  milliseconds, in a process of their own built as a worker builds its graph.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any

import httpx
import redis
from sqlalchemy import text

from bench import harness
from bench.harness import poller, scalar
from bench.stacks import NexusStack, nexus_stack
from nexus.queueing.stream_expiry import STREAM_REPLAY_WINDOW_S

SENDERS = 16
SETTLED = "SELECT count(*) FROM queue_items WHERE status IN ('done', 'dropped', 'dead')"
TURNS = "SELECT count(*) FROM turns WHERE turn_type = 'normal' AND status <> 'failed'"
LATENCIES = (
    "SELECT q.updated_at - e.received_at FROM queue_items q JOIN events e ON e.id = q.event_id "
    "WHERE q.status = 'done' AND e.received_at >= :since"
)
TICKS = 7  # looks timed per tick kind (the first, warming, not counted)
_numbers = count(20_000_000)


def _post(api_url: str, sessions: int, per_session: int) -> None:
    """`per_session` messages to each of `sessions` senders, round-robin over the senders
    (so one session's messages are spread out), from `SENDERS` threads."""
    plan = [sender for _ in range(per_session) for sender in range(sessions)]

    def send(index: int) -> None:
        with httpx.Client(base_url=api_url, timeout=60) as client:
            for sender in plan[index::SENDERS]:
                update = harness.telegram_update(next(_numbers), sender)
                client.post(
                    "/v1/inbound/telegram", json=update, headers=harness.TELEGRAM_HEADERS
                ).raise_for_status()

    with ThreadPoolExecutor(SENDERS) as pool:
        list(pool.map(send, range(SENDERS)))


def _settle(stack: NexusStack, sessions: int, per_session: int, timeout: float) -> dict[str, Any]:
    assert stack.api_url is not None
    engine = poller(stack.url)
    try:
        events = sessions * per_session
        target = scalar(engine, SETTLED) + events
        turns = scalar(engine, TURNS)
        since = int(time.time() * 1000)
        started = time.perf_counter()
        _post(stack.api_url, sessions, per_session)
        posted = time.perf_counter() - started
        harness.wait_for(
            lambda: scalar(engine, SETTLED) >= target,
            timeout=timeout,
            what="every message to be settled",
            every=0.2,
        )
        seconds = time.perf_counter() - started
        with engine.connect() as connection:
            found = connection.execute(text(LATENCIES), {"since": since}).scalars()
            waits = [float(v) for v in found]
        turns = scalar(engine, TURNS) - turns
        return {
            "events": events,
            "seconds": seconds,
            "posting_seconds": posted,
            "events_per_s": events / seconds,
            # Fewer sessions means longer backlogs per session, answered as batch turns
            # (interrupt mode): the turns tell how much of each side's rate is batching.
            "turns": turns,
            "turns_per_s": turns / seconds,
            "events_per_turn": events / max(1, turns),
            "latency_ms": _percentiles(waits),
        }
    finally:
        engine.dispose()


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples) or [0.0]

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]

    return {"p50": statistics.median(ordered), "p99": at(0.99), "samples": len(samples)}


def redis_per_session(prefix: str, session_ids: list[str]) -> dict[str, Any]:
    """`MEMORY USAGE` of the keys under `prefix`: those naming a session (per session, and
    by kind; all of them, and those outliving the stream's replay window), and the rest
    (the broker's, shared by all sessions)."""
    client = redis.Redis.from_url(harness.REDIS_URL)
    ids = set(session_ids)
    kinds: dict[str, Counter[str]] = {}
    per_session = past_window = other = 0
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.memory_usage(key, samples=0)
            pipe.ttl(key)
        answers = pipe.execute()
    for key, used, ttl in zip(keys, answers[0::2], answers[1::2], strict=True):
        if used is None:
            continue  # expired (a lease released) since the scan
        name = key.decode()[len(prefix) :]
        found = next((part for part in name.replace("/", ":").split(":") if part in ids), None)
        if found is None:
            other += int(used)
            continue
        per_session += int(used)
        outlives = ttl == -1 or ttl > STREAM_REPLAY_WINDOW_S
        past_window += int(used) * outlives
        kind = name.replace(found, "{session}")
        counted = kinds.setdefault(kind, Counter())
        counted["keys"] += 1
        counted["bytes"] += int(used)
        counted["bytes_past_window"] += int(used) * outlives
        counted["without_expiry"] += int(ttl == -1)
        counted["ttl_max_s"] = max(counted["ttl_max_s"], ttl)
    entries = [client.xlen(k) for k in keys if k.decode()[len(prefix) :].startswith("stream:")]
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


def _used_memory() -> int:
    client = redis.Redis.from_url(harness.REDIS_URL)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


def tick_costs(stack: NexusStack) -> dict[str, Any]:
    """The watchdog's look and the relay, counted in a process of their own (`ticks`)."""
    env = {**stack.env, "NEXUS_LOG_LEVEL": "WARNING", "PYTHONPATH": str(harness.ROOT)}
    # The counting process talks to Postgres and Redis straight, as `bench.counts` does.
    env["NEXUS_DATABASE_URL"], env["NEXUS_REDIS_URL"] = stack.url, harness.REDIS_URL
    ran = subprocess.run(
        [sys.executable, "-m", "bench.sessions", "ticks"],
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


def side(sessions: int, per_session: int, timeout: float) -> dict[str, Any]:
    """One fresh Nexus: `sessions` sessions created, then `per_session` timed messages
    each; then its idle sessions' Redis memory and its ticks' cost."""
    with (
        harness.scratch(f"sessions-{sessions}") as work,
        nexus_stack(work, queue_cap="100000") as stack,
    ):
        memory_before = _used_memory()
        _settle(stack, sessions, 1, timeout)  # creates every session
        found = _settle(stack, sessions, per_session, timeout)
        engine = poller(stack.url)
        try:
            # Every turn answered: nothing queued or claimed is left, no run holds a lease.
            harness.wait_for(
                lambda: (
                    scalar(
                        engine,
                        "SELECT count(*) FROM queue_items WHERE status IN ('queued', 'claimed')",
                    )
                    == 0
                ),
                timeout=60,
                what="the queues to empty",
            )
            with engine.connect() as connection:
                found_ids = connection.execute(text("SELECT id FROM sessions")).scalars()
                ids = [str(v) for v in found_ids]
        finally:
            engine.dispose()
        time.sleep(1)  # the last runs release their leases and finish their publishes
        found["redis"] = redis_per_session(stack.prefix, ids)
        found["redis"]["info_used_memory_delta_per_session"] = (
            _used_memory() - memory_before
        ) / max(1, len(ids))
        found["ticks"] = tick_costs(stack)
        found["sessions"] = sessions
        found["per_session"] = per_session
        # The two sides run one after the other: the machine's load beside each one's rate.
        found["load_average_after"] = os.getloadavg()
    return found


def run(
    *, quick: bool, many: int | None = None, few: int = 100, per_session: int = 2
) -> dict[str, Any]:
    many = many or (1_000 if quick else 10_000)
    total = many * per_session
    if total % few:
        raise ValueError(f"{total} messages do not spread evenly over {few} sessions")
    timeout = 600 if quick else 3_600
    few_side = side(few, total // few, timeout)
    many_side = side(many, per_session, timeout)
    return {
        "few": few_side,
        "many": many_side,
        "throughput_ratio": many_side["events_per_s"] / few_side["events_per_s"],
        "p99_ratio": many_side["latency_ms"]["p99"] / max(1.0, few_side["latency_ms"]["p99"]),
        "idle_session_bytes": many_side["redis"]["bytes_per_session_past_window"],
        "tick_growth": {
            name: {
                key: many_side["ticks"][name][key] - few_side["ticks"][name][key]
                for key in ("sql_per_tick", "redis_per_tick")
            }
            for name in ("watchdog", "relay")
        },
    }


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.sessions", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--many", type=int, help="sessions on the many side")
    parser.add_argument("--few", type=int, default=100, help="sessions on the few side")
    parser.add_argument("--per-session", type=int, default=2, help="timed messages each (many)")
    args = parser.parse_args(argv)
    found = run(quick=args.quick, many=args.many, few=args.few, per_session=args.per_session)
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    if sys.argv[1:] == ["ticks"]:
        os.environ.setdefault("NEXUS_LOG_LEVEL", "WARNING")
        print(json.dumps(_ticks()))
    else:
        main(sys.argv[1:])
