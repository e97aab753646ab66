"""Where one message's time goes: a webhook POST, one at a time at low load, and the time
each of its turn's stream entries reached Redis, read from the entries' ids (Redis stamps
each with its own clock in milliseconds, the same clock as this machine's on loopback).

    python -m bench.timeline            # 100 messages (after 10 to warm up)
    python -m bench.timeline --samples 300

Prints, per stage, the median time from the POST (and the step from the stage before):
the webhook's answer, the router's `queue.item.queued`, the run's `session.started`, the
model call's `step.*`, `turn.completing` (the commit begins) and `turn.committed`. Each
stage is what the runtime announces as it passes it, so nothing is added to the path.
Milliseconds are Redis's: a stage is known to ±1 ms, its median closer.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterable, Sequence
from typing import Any

import httpx
import redis

from bench import harness
from bench.latency import sender_stream, telegram_poster
from bench.stacks import nexus_stack

ANSWERED = "webhook answered"
OBSERVED = "observer woke"


def stages(samples: Iterable[Sequence[tuple[str, float]]]) -> list[dict[str, Any]]:
    """Each stage's median milliseconds from the POST, in the order the stages first come,
    and the step from the stage before; a stage seen several times in one message (two
    `message.created`) counts at its first."""
    at: dict[str, list[float]] = {}
    for marks in samples:
        seen: set[str] = set()
        for name, ms in marks:
            if name not in seen:
                seen.add(name)
                at.setdefault(name, []).append(ms)
    ordered = sorted(at, key=lambda name: statistics.median(at[name]))
    rows: list[dict[str, Any]] = []
    before = 0.0
    for name in ordered:
        median = statistics.median(at[name])
        rows.append({"stage": name, "ms": round(median, 2), "step_ms": round(median - before, 2)})
        before = median
    return rows


def _entries(found: Any, posted_ms: float) -> tuple[list[tuple[str, float]], bytes, bool]:
    marks: list[tuple[str, float]] = []
    last, done = b"0-0", False
    for _key, items in found or []:
        for entry_id, fields in items:
            stamp = int(entry_id.split(b"-")[0])
            kind = fields[b"type"].decode()
            marks.append((kind, stamp - posted_ms))
            last = entry_id
            done = done or kind == "turn.committed"
    return marks, last, done


def run(samples: int = 100) -> dict[str, Any]:
    with harness.scratch("timeline") as work, nexus_stack(work) as stack:
        assert stack.api_url is not None
        http = httpx.Client(base_url=stack.api_url, timeout=60)
        post = telegram_poster(http)
        key = sender_stream(stack, post)
        client = redis.Redis.from_url(harness.REDIS_URL)
        timed: list[list[tuple[str, float]]] = []
        for index in range(samples + 10):
            newest: Any = client.xrevrange(key, count=1)
            after = newest[0][0] if newest else b"0-0"
            posted_ms = time.time() * 1000
            post()
            marks = [(ANSWERED, time.time() * 1000 - posted_ms)]
            done = False
            while not done:
                found: Any = client.xread({key: after}, block=30_000)
                if not found:
                    raise TimeoutError("no turn.committed within 30 s")
                more, after, done = _entries(found, posted_ms)
                marks += more
            marks.append((OBSERVED, time.time() * 1000 - posted_ms))
            if index >= 10:
                timed.append(marks)
            time.sleep(0.02)  # low load: the system is idle when each message arrives
        client.close()
        http.close()
    return {"samples": len(timed), "stages": stages(timed)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.timeline", description=__doc__)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    found = run(args.samples)
    if args.json:
        print(json.dumps(found, indent=2))
        return
    print(f"{found['samples']} messages, medians from the POST:")
    print("| stage | ms | step |\n|---|---|---|")
    for row in found["stages"]:
        print(f"| {row['stage']} | {row['ms']:.1f} | +{row['step_ms']:.1f} |")


if __name__ == "__main__":
    main()
