"""Pipeline vs its floor: events/s and CPU ms per event, Nexus end to end beside the bare
Celery sketch of the same hops, in the same run with the same worker settings.

Nexus: signed Telegram webhook POSTs from 16 senders (16 DM sessions) → `nexus api` →
`nexus worker` (router, session run, the scripted model) → every queue item settled.
Bare: `bare.route` published from here → router task → session task (Redis lock + the
four-statement turn write) → every turn written. Rounds alternate (bare, Nexus, Nexus,
bare, …) so the machine's noise falls on both alike.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any

import httpx

from bench import harness
from bench.harness import cpu_of, poller, scalar
from bench.stacks import BareStack, NexusStack, bare_stack, nexus_stack

SENDERS = 16
SETTLED = "SELECT count(*) FROM queue_items WHERE status IN ('done', 'dropped', 'dead')"
DROPPED = "SELECT count(*) FROM queue_items WHERE status IN ('dropped', 'dead')"
TURNS = "SELECT count(*) FROM turns WHERE turn_type = 'normal' AND status <> 'failed'"
_numbers = count(1)


def _post_all(api_url: str, events: int) -> None:
    """`events` webhook deliveries, one thread per sender (a sender's messages in order)."""

    def sender(index: int) -> None:
        with httpx.Client(base_url=api_url, timeout=60) as client:
            for _ in range(index, events, SENDERS):
                update = harness.telegram_update(next(_numbers), index)
                answer = client.post(
                    "/v1/inbound/telegram", json=update, headers=harness.TELEGRAM_HEADERS
                )
                answer.raise_for_status()

    with ThreadPoolExecutor(SENDERS) as pool:
        list(pool.map(sender, range(SENDERS)))


def nexus_round(stack: NexusStack, events: int, timeout: float) -> dict[str, Any]:
    assert stack.api_url is not None
    engine = poller(stack.url)
    try:
        target = scalar(engine, SETTLED) + events
        turns, dropped = scalar(engine, TURNS), scalar(engine, DROPPED)
        cpu, started = cpu_of(stack.measured), time.perf_counter()
        _post_all(stack.api_url, events)
        posted = time.perf_counter() - started
        harness.wait_for(
            lambda: scalar(engine, SETTLED) >= target, timeout=timeout, what="Nexus to settle"
        )
        seconds = time.perf_counter() - started
        cpu = cpu_of(stack.measured) - cpu
        return {
            "events": events,
            "seconds": seconds,
            "posting_seconds": posted,
            "events_per_s": events / seconds,
            "cpu_ms_per_event": cpu * 1000 / events,
            "turns": scalar(engine, TURNS) - turns,
            "dropped": scalar(engine, DROPPED) - dropped,
        }
    finally:
        engine.dispose()


def bare_round(stack: BareStack, events: int, timeout: float) -> dict[str, Any]:
    engine = poller(stack.url)
    try:
        target = scalar(engine, "SELECT count(*) FROM turns") + events
        cpu, started = cpu_of(stack.workers), time.perf_counter()
        for number in range(events):
            stack.client.send_task("bare.route", args=[str(number % SENDERS), f"m{number}"])
        posted = time.perf_counter() - started
        harness.wait_for(
            lambda: scalar(engine, "SELECT count(*) FROM turns") >= target,
            timeout=timeout,
            what="the bare sketch to write every turn",
        )
        seconds = time.perf_counter() - started
        cpu = cpu_of(stack.workers) - cpu
        return {
            "events": events,
            "seconds": seconds,
            "posting_seconds": posted,
            "events_per_s": events / seconds,
            "cpu_ms_per_event": cpu * 1000 / events,
            "turns": events,
        }
    finally:
        engine.dispose()


def run(*, quick: bool) -> dict[str, Any]:
    events, rounds = (200, 1) if quick else (3_000, 1)
    timeout = 120 if quick else 600
    with (
        harness.scratch("pipeline") as work,
        # A cap above the run's backlog: every event becomes (part of) a turn, as in the
        # bare sketch, instead of the overflow being summarised away.
        nexus_stack(work, queue_cap="100000") as nexus,
        bare_stack(work, senders=SENDERS) as bare,
    ):
        # Warm-up: sessions, contacts, pools and caches exist before anything is timed.
        nexus_round(nexus, SENDERS, timeout)
        bare_round(bare, SENDERS, timeout)
        found: dict[str, list[dict[str, Any]]] = {"nexus": [], "bare": []}
        for index in range(rounds):
            order = ("bare", "nexus") if index % 2 == 0 else ("nexus", "bare")
            for side in order:
                if side == "nexus":
                    found["nexus"].append(nexus_round(nexus, events, timeout))
                else:
                    found["bare"].append(bare_round(bare, events, timeout))
    summary: dict[str, Any] = {"events": events, "senders": SENDERS, "rounds": found}
    for side, results in found.items():
        summary[side] = {
            key: statistics.median(r[key] for r in results)
            for key in ("events_per_s", "cpu_ms_per_event", "turns")
        }
    summary["ratio"] = summary["nexus"]["events_per_s"] / summary["bare"]["events_per_s"]
    summary["cpu_ratio"] = (
        summary["nexus"]["cpu_ms_per_event"] / summary["bare"]["cpu_ms_per_event"]
    )
    summary["cpu_includes"] = {
        "nexus": "nexus api + nexus worker (parent and pool processes)",
        "bare": "bare worker (parent and pool processes); publishing runs in the bench process",
        "neither": "PostgreSQL and Redis servers, the load generator",
    }
    return summary


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
