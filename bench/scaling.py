"""Scaling: turns committed per second in steady state with 1 / 2 / 4 / 8 worker processes,
the scripted model taking 200 ms per call (NEXUS_SCRIPTED_DELAY_MS), 100 sessions.

Each worker is `nexus worker -c 1`: Nexus's own prefork pool with one pool process, so N
workers run N turns at once. Every configuration gets a fresh database whose queues are
filled before the workers start (queue mode: one turn per message); the workers' relay
on start rings every session. The rate is counted over a fixed window after a warm-up.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from bench import harness
from bench.harness import cpu_of, poller, scalar
from bench.stacks import fill_queues, nexus_stack

SESSIONS, DELAY_MS = 100, 200
COMMITTED = "SELECT count(*) FROM turns WHERE turn_type = 'normal' AND status = 'completed'"


def measure(processes: int, *, per_session: int, warm_s: float, window_s: float) -> dict[str, Any]:
    with (
        harness.scratch(f"scaling-{processes}") as work,
        nexus_stack(
            work,
            workers=processes,
            concurrency=1,
            api=False,
            prepare=partial(fill_queues, sessions=SESSIONS, per_session=per_session),
            scripted_delay_ms=str(DELAY_MS),
        ) as stack,
    ):
        engine = poller(stack.url)
        try:
            harness.wait_for(
                lambda: scalar(engine, COMMITTED) >= processes,
                timeout=60,
                what="the first turns",
            )
            time.sleep(warm_s)
            turns, cpu, started = scalar(engine, COMMITTED), cpu_of(stack.workers), time.monotonic()
            time.sleep(window_s)
            turns = scalar(engine, COMMITTED) - turns
            seconds = time.monotonic() - started
            cpu = cpu_of(stack.workers) - cpu
            left = per_session * SESSIONS - scalar(engine, COMMITTED)
        finally:
            engine.dispose()
    if left <= 0:
        raise RuntimeError(f"{processes} workers ran out of work inside the window")
    return {
        "processes": processes,
        "turns": turns,
        "seconds": seconds,
        "turns_per_s": turns / seconds,
        "cpu_ms_per_turn": cpu * 1000 / max(turns, 1),
        "ideal_turns_per_s": processes * 1000 / DELAY_MS,
    }


def run(*, quick: bool) -> dict[str, Any]:
    counts = [1, 2] if quick else [1, 2, 4, 8]
    warm_s, window_s = (0.5, 3.0) if quick else (2.0, 15.0)
    per_session = 2 if quick else 8
    rows = {
        str(n): measure(n, per_session=per_session, warm_s=warm_s, window_s=window_s)
        for n in counts
    }
    base = rows["1"]["turns_per_s"]
    for row in rows.values():
        row["speedup"] = row["turns_per_s"] / base
    top = "4" if "4" in rows else str(counts[-1])
    return {
        "sessions": SESSIONS,
        "delay_ms": DELAY_MS,
        "processes": rows,
        "compared": int(top),
        "ratio": rows[top]["speedup"],
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
