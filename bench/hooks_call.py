"""Per-call cost of a hook: on threads of the worker (the old way) against hook processes.

    python -m bench.hooks_call [--calls 500]

One trivial hook and a batch of five, evaluated as the hook runner does (`evaluate_all`),
alternating the two sides round by round; prints p50/p95 per batch in milliseconds. The
pool is warmed first: its start-up (a process importing Nexus) is paid once per worker
process, not per call, and is reported on its own.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from nexus.hooks.evaluator import evaluate_all
from nexus.hooks.loader import LoadedHook, load_hooks
from nexus.hooks.pool import HookPool
from nexus.hooks.spec import HookContext
from nexus.ledger.records import EventRecord

HOOK = """
from nexus.hooks.spec import HookMeta, HookResult
HOOK = HookMeta(name="h{n}")
def evaluate(ctx):
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1
    return HookResult(fire="invoice" in (ctx.event.text or ""), prompt=ctx.event.text)
"""
EVENT = EventRecord(
    id="e1", adapter="api", platform="api", kind="message", direction="inbound", source=None,
    space=None, sender_id="u", sender_name="Ada", contact_id=None, container_kind=None,
    container_id=None, platform_thread_id=None, text="invoice 7", reply_to=None,
    message_id=None, occurred_at=0, received_at=0, status="received", disposition=None,
    disposition_detail=None,
)  # fmt: skip


def _context(hook: LoadedHook) -> HookContext:
    return HookContext(
        event=EVENT,
        now_ms=0,
        minute_ms=None,
        state={"seen": 1},
        search_events=lambda query, limit: [],
        recent_events=lambda limit: [],
        llm=lambda prompt: "",
    )


def _time(hooks: list[LoadedHook], pool: HookPool | None) -> float:
    started = time.perf_counter()
    invocations = evaluate_all(hooks, _context, now_ms=lambda: 0, pool=pool)
    elapsed = (time.perf_counter() - started) * 1000
    assert all(i.fired for i in invocations), [i.error for i in invocations]
    return elapsed


def _figures(samples: list[float]) -> str:
    p95 = statistics.quantiles(samples, n=20)[-1]
    return f"p50 {statistics.median(samples):6.2f} ms   p95 {p95:6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as folder:
        for n in range(5):
            Path(folder, f"h{n}.py").write_text(HOOK.format(n=n))
        hooks = list(load_hooks(folder).hooks)
        pool = HookPool(size=5)
        started = time.perf_counter()
        _time(hooks, pool)
        cold = (time.perf_counter() - started) * 1000
        for batch in (hooks[:1], hooks):
            threads: list[float] = []
            processes: list[float] = []
            for round_ in range(calls):
                order = [(threads, None), (processes, pool)]
                for samples, side in order if round_ % 2 else reversed(order):
                    samples.append(_time(batch, side))
            print(f"{len(batch)} hook(s), threads:   {_figures(threads)}")
            print(f"{len(batch)} hook(s), processes: {_figures(processes)}")
        print(f"first call, 5 processes started: {cold:.0f} ms")
        pool.close()


if __name__ == "__main__":
    main()
