"""Footprint: one worker's RSS (`nexus worker -c 1`: the parent and its pool process) over
10,000 turns with the scripted model, sampled as turns commit. Growth is the last sample
against the first one after a warm-up (10 % of the turns)."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from bench import harness
from bench.harness import poller, scalar
from bench.scaling import COMMITTED
from bench.stacks import fill_queues, nexus_stack

SESSIONS = 100
MIB = 2**20


def run(*, quick: bool, turns: int | None = None) -> dict[str, Any]:
    turns = turns or (300 if quick else 10_000)
    per_session = turns // SESSIONS
    samples: list[dict[str, float]] = []
    with (
        harness.scratch("footprint") as work,
        nexus_stack(
            work,
            workers=1,
            concurrency=1,
            api=False,
            prepare=partial(fill_queues, sessions=SESSIONS, per_session=per_session),
        ) as stack,
    ):
        engine = poller(stack.url)
        worker = stack.workers[0]
        started = time.monotonic()
        try:
            while True:
                done = scalar(engine, COMMITTED)
                samples.append(
                    {
                        "turns": done,
                        "rss_mib": worker.rss_bytes() / MIB,
                        "seconds": time.monotonic() - started,
                    }
                )
                if done >= turns:
                    break
                if time.monotonic() - started > 1_200:
                    raise TimeoutError(f"only {done} of {turns} turns in 20 minutes")
                time.sleep(0.5)
        finally:
            engine.dispose()
    warm = next(s for s in samples if s["turns"] >= turns * 0.1)
    last = samples[-1]
    return {
        "turns": turns,
        "sessions": SESSIONS,
        "warm_rss_mib": warm["rss_mib"],
        "last_rss_mib": last["rss_mib"],
        "growth": (last["rss_mib"] - warm["rss_mib"]) / warm["rss_mib"],
        "turns_per_s": turns / last["seconds"],
        "samples": samples,
    }


if __name__ == "__main__":
    import json
    import sys

    result = run(quick="--quick" in sys.argv)
    result.pop("samples")
    print(json.dumps(result, indent=2))
