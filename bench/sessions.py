"""Many sessions: the same messages spread over 10,000 sessions against 100, and what an
idle session costs afterwards.

Each side is a fresh Nexus (`nexus api` + `nexus worker`, its own database and Redis
prefix). Every session gets one message first (it creates the session; not timed), then
the timed messages: 10,000 sessions × 2 against 100 × 200 (`--quick`: 1,000 × 2 against
100 × 20). The target's run is a closed loop: each session is a conversation whose person
waits for the answer before writing again, with the same number of conversations in flight
on both sides, so both run the same turns and only the number of sessions differs. The
open loop (every message posted at once) is kept beside it: it shows batching. Measured on
each side:

- events/s from the first timed message until every queue item is settled, and each
  event's latency from its `received_at` to its queue item's settlement (p50, p99;
  milliseconds as the ledger stamps them);
- what an idle session costs in Redis, and the watchdog's and the relay's cost per tick
  with every session idle (`bench/idle.py`).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any

import httpx
import redis
from sqlalchemy import text

from bench import harness
from bench.harness import poller, scalar
from bench.idle import redis_per_session, tick_costs, used_memory
from bench.stacks import NexusStack, nexus_stack

SENDERS = 16
SETTLED = "SELECT count(*) FROM queue_items WHERE status IN ('done', 'dropped', 'dead')"
TURNS = "SELECT count(*) FROM turns WHERE turn_type = 'normal' AND status <> 'failed'"
LATENCIES = (
    "SELECT q.updated_at - e.received_at FROM queue_items q JOIN events e ON e.id = q.event_id "
    "WHERE q.status = 'done' AND e.received_at >= :since"
)
SESSION_OF_SENDER = (
    "SELECT c.sender_id, s.id FROM contacts c JOIN sessions s ON s.label = 'dm:' || c.entity_id "
    "WHERE c.platform = 'telegram'"
)
CONCURRENCY = 32  # conversations in flight at once in the closed loop, on both sides
ANSWER_WITHIN_MS = 120_000
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


def _conversations(
    api_url: str, streams: dict[int, str], per_session: int, concurrency: int
) -> None:
    """Closed loop: each sender is a person who writes, waits for the answer, then writes
    again, `per_session` times; `concurrency` conversations are in flight at once. The
    senders wait in one line: a conversation answered goes to the back of it, and the next
    in line is written to, so every sender's messages are spread over the run and exactly
    `concurrency` are in flight until fewer senders than that have messages left.

    "Answered" is the `turn.committed` entry on the session's Redis stream (`streams`, by
    sender), read with a blocking XREAD as the latency benchmark reads it: written right
    after the turn's commit, which settles the message's queue item in its transaction.
    No interval is added and the database is not touched by the observer."""
    waiting = deque((sender, per_session) for sender in streams)
    lock = threading.Lock()

    def talk() -> None:
        # redis-py's own socket timeout (5 s by default) would cut a blocking read short.
        reader = redis.Redis.from_url(harness.REDIS_URL, socket_timeout=ANSWER_WITHIN_MS / 900)
        with httpx.Client(base_url=api_url, timeout=60) as client:
            while True:
                with lock:
                    if not waiting:
                        break
                    sender, left = waiting.popleft()
                key = streams[sender]
                newest: Any = reader.xrevrange(key, count=1)
                after = newest[0][0] if newest else "0-0"
                update = harness.telegram_update(next(_numbers), sender)
                client.post(
                    "/v1/inbound/telegram", json=update, headers=harness.TELEGRAM_HEADERS
                ).raise_for_status()
                while True:
                    entries: Any = reader.xread({key: after}, block=ANSWER_WITHIN_MS)
                    if not entries:
                        raise TimeoutError(f"sender {sender}: no answer within 120 s")
                    items = entries[0][1]
                    if any(fields.get(b"type") == b"turn.committed" for _, fields in items):
                        break
                    after = items[-1][0]
                if left > 1:
                    with lock:
                        waiting.append((sender, left - 1))
        reader.close()

    with ThreadPoolExecutor(concurrency) as pool:
        for done in [pool.submit(talk) for _ in range(concurrency)]:
            done.result()


def _streams(stack: NexusStack, sessions: int) -> dict[int, str]:
    """Each sender's session stream key (every session exists)."""
    engine = poller(stack.url)
    try:
        with engine.connect() as connection:
            found = connection.execute(text(SESSION_OF_SENDER)).all()
    finally:
        engine.dispose()
    streams = {int(sender) - 7000: f"{stack.prefix}stream:{session}" for sender, session in found}
    assert sorted(streams) == list(range(sessions)), "a sender without its session"
    return streams


def _settle(
    stack: NexusStack,
    sessions: int,
    per_session: int,
    timeout: float,
    *,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """Post `per_session` messages to each sender and wait until all are settled: open
    loop (every message as fast as `SENDERS` threads post) or, with `concurrency`, closed
    (`_conversations`)."""
    assert stack.api_url is not None
    streams = _streams(stack, sessions) if concurrency else {}
    engine = poller(stack.url)
    try:
        events = sessions * per_session
        target = scalar(engine, SETTLED) + events
        turns = scalar(engine, TURNS)
        since = int(time.time() * 1000)
        started = time.perf_counter()
        if concurrency:
            _conversations(stack.api_url, streams, per_session, concurrency)
        else:
            _post(stack.api_url, sessions, per_session)
        posted = time.perf_counter() - started
        harness.wait_for(
            lambda: scalar(engine, SETTLED) >= target,
            timeout=timeout,
            what="every message to be settled",
            every=0.2,
        )
        # Closed: the last answer was read when the loop ended; the poll adds nothing.
        seconds = posted if concurrency else time.perf_counter() - started
        with engine.connect() as connection:
            found = connection.execute(text(LATENCIES), {"since": since}).scalars()
            waits = [float(v) for v in found]
        turns = scalar(engine, TURNS) - turns
        return {
            "loop": "closed" if concurrency else "open",
            "concurrency": concurrency or SENDERS,
            "events": events,
            "seconds": seconds,
            "posting_seconds": posted,
            "events_per_s": events / seconds,
            # Open loop, fewer sessions means longer backlogs per session, answered as
            # batch turns (interrupt mode): the turns tell how much of the rate is batching.
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


def side(
    sessions: int, per_session: int, timeout: float, *, concurrency: int, open_loop: bool
) -> dict[str, Any]:
    """One fresh Nexus: `sessions` sessions created, then `per_session` timed messages
    each in closed loop (`concurrency` conversations in flight) and, if `open_loop`,
    `per_session` more each, open loop; then its idle sessions' Redis memory and its
    ticks' cost."""
    with (
        harness.scratch(f"sessions-{sessions}") as work,
        nexus_stack(work, queue_cap="100000") as stack,
    ):
        memory_before = used_memory()
        _settle(stack, sessions, 1, timeout)  # creates every session
        _quiet(stack, timeout)
        found: dict[str, Any] = {
            "closed": _settle(stack, sessions, per_session, timeout, concurrency=concurrency)
        }
        if open_loop:
            _quiet(stack, timeout)
            found["open"] = _settle(stack, sessions, per_session, timeout)
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
            used_memory() - memory_before
        ) / max(1, len(ids))
        found["ticks"] = tick_costs(stack)
        found["sessions"] = sessions
        found["per_session"] = per_session
        # The two sides run one after the other: the machine's load beside each one's rate.
        found["load_average_after"] = os.getloadavg()
    return found


def _quiet(stack: NexusStack, timeout: float) -> None:
    """Wait until no task waits in the broker for the side's worker. Every message settled
    is not enough: runs rung for sessions another run answered meanwhile (each finds nothing
    to do) can still wait in the `sessions` queue, and a timed run started behind them
    would queue its own rings after that backlog."""
    client = redis.Redis.from_url(harness.REDIS_URL)
    queues = [f"{stack.prefix}{name}" for name in ("events", "sessions")]
    try:
        harness.wait_for(
            lambda: sum(int(client.llen(queue)) for queue in queues) == 0,
            timeout=timeout,
            what="the broker's queues to empty",
            every=0.2,
        )
    finally:
        client.close()


def _ratios(many: dict[str, Any], few: dict[str, Any]) -> dict[str, float]:
    return {
        "throughput_ratio": many["events_per_s"] / few["events_per_s"],
        "p50_ratio": many["latency_ms"]["p50"] / max(1.0, few["latency_ms"]["p50"]),
        "p99_ratio": many["latency_ms"]["p99"] / max(1.0, few["latency_ms"]["p99"]),
    }


def run(
    *,
    quick: bool,
    many: int | None = None,
    few: int = 100,
    per_session: int = 2,
    concurrency: int = CONCURRENCY,
    open_loop: bool = True,
) -> dict[str, Any]:
    many = many or (1_000 if quick else 10_000)
    total = many * per_session
    if total % few:
        raise ValueError(f"{total} messages do not spread evenly over {few} sessions")
    concurrency = min(concurrency, few)  # a conversation in flight is a session
    timeout = 600 if quick else 3_600
    few_side = side(few, total // few, timeout, concurrency=concurrency, open_loop=open_loop)
    many_side = side(many, per_session, timeout, concurrency=concurrency, open_loop=open_loop)
    found: dict[str, Any] = {
        "few": few_side,
        "many": many_side,
        "concurrency": concurrency,
        # The target's figures: the closed loop, the same turns on both sides.
        **_ratios(many_side["closed"], few_side["closed"]),
        "idle_session_bytes": many_side["redis"]["bytes_per_session_past_window"],
        "tick_growth": {
            name: {
                key: many_side["ticks"][name][key] - few_side["ticks"][name][key]
                for key in ("sql_per_tick", "redis_per_tick")
            }
            for name in ("watchdog", "relay")
        },
    }
    if open_loop:
        found["open"] = _ratios(many_side["open"], few_side["open"])
    return found


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.sessions", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--many", type=int, help="sessions on the many side")
    parser.add_argument("--few", type=int, default=100, help="sessions on the few side")
    parser.add_argument("--per-session", type=int, default=2, help="timed messages each (many)")
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help="conversations in flight (closed)"
    )
    parser.add_argument(
        "--no-open-loop", action="store_true", help="skip the open-loop run (batching)"
    )
    args = parser.parse_args(argv)
    found = run(
        quick=args.quick,
        many=args.many,
        few=args.few,
        per_session=args.per_session,
        concurrency=args.concurrency,
        open_loop=not args.no_open_loop,
    )
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
