"""The suite's report: one Markdown table (Nexus figure, baseline, ratio, target, met?),
the JSON files, and a chart of every targeted ratio against its target."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    benchmark: str
    nexus: float
    baseline: float
    unit: str
    baseline_is: str
    ratio: float
    target: float | None = None  # None: shown for context, no target
    at_least: bool = True  # the ratio must be ≥ target (else ≤)

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.ratio >= self.target if self.at_least else self.ratio <= self.target

    @property
    def score(self) -> float:
        """Above 1 meets the target, whichever way it points."""
        assert self.target is not None
        return self.ratio / self.target if self.at_least else self.target / self.ratio


def _info(name: str, nexus: float, base: float, unit: str, base_is: str) -> Row:
    return Row(name, nexus, base, unit, base_is, nexus / base)


def rows_for(name: str, r: dict[str, Any]) -> list[Row]:
    """The table's rows for one benchmark's result (none for one that failed)."""
    if "error" in r:
        return []
    if "distance" in r:
        return _at_distance(name, r)
    builder = _BUILDERS[name]
    return builder(r)


# The targets across a network: at a 1 ms round trip to Postgres and Redis.
DISTANCE_TARGET_RTT_MS = 1.0


def _at_distance(name: str, r: dict[str, Any]) -> list[Row]:
    """`--rtt-ms`: the ratios that distance can move, each side through the same proxies;
    targets at a 1 ms round trip, the other round trips shown for context."""
    d = r["distance"]
    at = f"RTT {d['rtt_ms']:g} ms (measured {d['redis_ping_proxied_ms']:.2f})"
    targeted = d["rtt_ms"] == DISTANCE_TARGET_RTT_MS
    if name == "pipeline":
        n, b = r["nexus"]["events_per_s"], r["bare"]["events_per_s"]
        # Nexus answers a session's backlog as one batch turn; the sketch writes a turn per
        # event: the turns say how much of the ratio is batching.
        turns = f"{r['nexus']['turns']:,.0f} vs {r['bare']['turns']:,.0f} turns"
        name = f"pipeline events/s, {at}; {turns}"
        target_ratio = 1.0 if targeted else None
        return [Row(name, n, b, "ev/s", "bare Celery sketch", r["ratio"], target_ratio)]
    n, f, b = r["nexus_ms"], r["floor_ms"], r["round_trip_ms"]
    target = 1.3 if targeted else None
    return [
        Row(f"latency p50 over its floor, {at}", n["p50"], f["p50"], "ms", "the floor p50",
            n["p50"] / f["p50"], target, False),
        _info(f"… latency p50, {at}", n["p50"], b["p50"], "ms", "Celery round trip p50"),
    ]  # fmt: skip


def _pipeline(r: dict[str, Any]) -> list[Row]:
    n, b, base = r["nexus"], r["bare"], "bare Celery sketch"
    cpu = "pipeline CPU ms/event (lower is better)"
    return [
        Row("pipeline events/s", n["events_per_s"], b["events_per_s"], "ev/s", base, r["ratio"], 1),
        _info(cpu, n["cpu_ms_per_event"], b["cpu_ms_per_event"], "ms", base),
    ]


def _latency(r: dict[str, Any]) -> list[Row]:
    n, b = r["nexus_ms"], r["round_trip_ms"]
    first = "latency p50, webhook → turn committed"
    return [
        Row(first, n["p50"], b["p50"], "ms", "Celery round trip p50", r["ratio"], 3.0, False),
        _info("latency p95", n["p95"], b["p95"], "ms", "Celery round trip p95"),
        _info("latency p99", n["p99"], b["p99"], "ms", "Celery round trip p99"),
        *_floor(r),
    ]


def _floor(r: dict[str, Any]) -> list[Row]:
    """The same hops written bare (`bench/floor_app.py`): what the path's shape costs."""
    if "floor_ms" not in r:
        return []
    f, n, b = r["floor_ms"], r["nexus_ms"], r["round_trip_ms"]
    return [
        _info("… latency floor p50 (the hops written bare)", f["p50"], b["p50"], "ms",
              "Celery round trip p50"),
        # On loopback: the floor's hops cost no network, so what is over it is Nexus's own.
        Row("latency p50 over its floor", n["p50"], f["p50"], "ms", "the floor p50",
            n["p50"] / f["p50"], 1.25, False),
        Row("latency p99 over its floor", n["p99"], f["p99"], "ms", "the floor p99",
            n["p99"] / f["p99"], 1.5, False),
    ]  # fmt: skip


def _depth(r: dict[str, Any]) -> list[Row]:
    d = r["depths"]
    first, last = min(d, key=int), max(d, key=int)
    name, base = f"context assembly, depth {int(last):,}", f"depth {int(first):,}"
    deep, shallow = d[last]["assembly_ms"], d[first]["assembly_ms"]
    return [Row(name, deep, shallow, "ms", base, deep / shallow, 1.5, False)]


def _peer(r: dict[str, Any]) -> list[Row]:
    out, base = [], "LangGraph PostgresSaver"
    for depth, x in r["depths"].items():
        name = f"commit + read context, depth {int(depth):,} (speed-up)"
        flat = f"… same, Nexus without compaction, depth {int(depth):,}"
        out.append(Row(name, x["nexus_ms"], x["langgraph_ms"], "ms", base, x["speedup"], 2.0))
        flat_ms, flat_speedup = x["nexus_uncompacted_ms"], x["speedup_uncompacted"]
        out.append(Row(flat, flat_ms, x["langgraph_ms"], "ms", base, flat_speedup))
    return out


def _scaling(r: dict[str, Any]) -> list[Row]:
    p, top = r["processes"], str(r["compared"])
    one = p["1"]["turns_per_s"]

    def row(n: str, target: float | None) -> Row:
        name = f"turns/s, {n} worker processes (200 ms model)"
        return Row(name, p[n]["turns_per_s"], one, "turns/s", "1 process", p[n]["speedup"], target)

    return [row(top, 3.5 if top == "4" else None)] + [
        row(n, None) for n in p if n not in ("1", top)
    ]


def _footprint(r: dict[str, Any]) -> list[Row]:
    name = f"worker RSS after {r['turns']:,} turns"
    last, warm = r["last_rss_mib"], r["warm_rss_mib"]
    return [Row(name, last, warm, "MiB", "after the first 10 %", last / warm, 1.10, False)]


def _ledger(r: dict[str, Any]) -> list[Row]:
    out = []
    for db in ("postgres", "sqlite"):
        c, reads = r[db]["commits"], r[db]["reads"]
        depths = sorted((k for k in reads if k.isdigit()), key=int)
        first, last = depths[0], depths[-1]
        deep, shallow = reads[last]["context_ms"], reads[first]["context_ms"]
        name, base = f"ledger turn commits/s ({db})", "bare Core write"
        out.append(Row(name, c["repository"], c["bare"], "commits/s", base, c["ratio"], 0.8))
        name, base = f"ledger context read, depth {int(last):,} ({db})", f"depth {int(first):,}"
        out.append(Row(name, deep, shallow, "ms", base, deep / shallow, 2.0, False))
    return out


def _streams(r: dict[str, Any]) -> list[Row]:
    count, target, live = r["streams"], r["target_p99_ms"], r["streams_live"]
    # Latency with dead streams proves nothing: every stream must still deliver at the end.
    name = "open SSE streams still delivering events"
    out = [Row(name, live, count, "streams", "streams opened", live / count, 1.0)]
    for key, what in (("healthz_ms", "/healthz"), ("rest_ms", "GET /v1/sessions/{label}")):
        none, open_ = r[key]["none_open"]["p99"], r[key]["streams_open"]["p99"]
        name = f"{what} p99 with {count:,} open SSE streams"
        out.append(_info(name, open_, none, "ms", "no stream open"))
        absolute = f"… the same against its {target:g} ms target"
        out.append(Row(absolute, open_, target, "ms", "target", open_ / target, 1.0, False))
    return out


def _prompt_cache(r: dict[str, Any]) -> list[Row]:
    read, prompt = r["second_turn_cache_read"], r["second_turn_prompt_tokens"]
    name = "prompt cache: 2nd turn's prompt tokens read from the cache"
    return [Row(name, read, prompt, "tokens", "its prompt tokens", r["ratio"], r["target"])]


def _sessions(r: dict[str, Any]) -> list[Row]:
    many, few = r["many"], r["few"]
    m, f = f"{many['sessions']:,} sessions", f"{few['sessions']:,} sessions"
    mem = many["redis"]["bytes_per_session_past_window"]
    at_once = many["redis"]["bytes_per_session"]
    window = f"{many['redis']['replay_window_s']} s replay window"
    mc, fc = many["closed"], few["closed"]
    c = f"{r['concurrency']} conversations in flight"
    out = [
        Row(f"events/s over {m}, {c}", mc["events_per_s"], fc["events_per_s"], "ev/s", f,
            r["throughput_ratio"], 0.9),
        _info(f"… turns/s over {m}, {c} ({mc['events_per_turn']:.1f} vs "
              f"{fc['events_per_turn']:.1f} events a turn)", mc["turns_per_s"],
              fc["turns_per_s"], "turns/s", f),
        Row(f"event → settled p99 over {m}, {c}", mc["latency_ms"]["p99"],
            fc["latency_ms"]["p99"], "ms", f, r["p99_ratio"], 1.2, False),
        Row(f"Redis bytes per idle session past the {window} ({m})", mem, 2048, "B", "2 KB",
            mem / 2048, 1.0, False),
        _info(f"… within the {window}, the streams still there ({m})", at_once, 2048, "B",
              "2 KB"),
    ]  # fmt: skip
    if "open" in r:  # every message at once: it shows batching, not what sessions cost
        mo, fo = many["open"], few["open"]
        out += [
            _info(f"… open loop (all posted at once): events/s over {m} "
                  f"({mo['events_per_turn']:.1f} vs {fo['events_per_turn']:.1f} events a turn)",
                  mo["events_per_s"], fo["events_per_s"], "ev/s", f),
            _info(f"… open loop: event → settled p99 over {m}", mo["latency_ms"]["p99"],
                  fo["latency_ms"]["p99"], "ms", f),
        ]  # fmt: skip
    for tick in ("watchdog", "relay"):
        # Round trips of both kinds: a look costs at least its statements, never 0.
        name = f"{tick} statements + Redis round trips per tick, {m} idle"
        n, b = (
            sum(x["ticks"][tick][k] for k in ("sql_per_tick", "redis_per_tick"))
            for x in (many, few)
        )
        out.append(Row(name, n, b, "", f"{f} idle", n / b, 1.0, False))
        n, b = many["ticks"][tick]["ms_per_tick"], few["ticks"][tick]["ms_per_tick"]
        out.append(_info(f"… {tick} ms per tick, {m} idle", n, b, "ms", f"{f} idle"))
    return out


def _storage(r: dict[str, Any]) -> list[Row]:
    n, peer = r["nexus_bytes_per_turn"], r["langgraph_bytes_per_turn"]
    name = f"bytes on disk per turn after {r['turns']:,} turns of prose (how many times smaller)"
    compact = f"… the same, tables rewritten compact (VACUUM FULL), after {r['turns']:,} turns"
    n_c, peer_c = r["nexus_compact_bytes_per_turn"], r["langgraph_compact_bytes_per_turn"]
    rows = [
        Row(name, n, peer, "B", "LangGraph PostgresSaver", r["ratio"], 10.0),
        Row(compact, n_c, peer_c, "B", "LangGraph PostgresSaver", r["compact_ratio"]),
    ]
    if "short" in r:  # the same with a tiny message each turn: what pglz flatters
        s = r["short"]
        tiny = '… the same with "question i" / "re: question i" each turn' + (
            f", after {r['turns']:,} turns"
        )
        rows.append(
            Row(
                tiny,
                s["nexus_bytes_per_turn"],
                s["langgraph_bytes_per_turn"],
                "B",
                "LangGraph PostgresSaver",
                s["ratio"],
            )
        )
    return rows


_BUILDERS = {
    "pipeline": _pipeline,
    "latency": _latency,
    "depth": _depth,
    "peer": _peer,
    "scaling": _scaling,
    "footprint": _footprint,
    "ledger": _ledger,
    "streams": _streams,
    "prompt_cache": _prompt_cache,
    "sessions": _sessions,
    "storage": _storage,
}


def _figure(value: float, unit: str) -> str:
    shown = f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"
    return f"{shown} {unit}"


def table(rows: list[Row], errors: dict[str, str]) -> str:
    lines = [
        "| benchmark | Nexus | baseline | ratio | target | met? |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        target = "—" if row.target is None else f"{'≥' if row.at_least else '≤'} {row.target:g}×"
        met = {True: "yes", False: "**no**", None: ""}[row.met]
        baseline = f"{_figure(row.baseline, row.unit)} ({row.baseline_is})"
        lines.append(
            f"| {row.benchmark} | {_figure(row.nexus, row.unit)} | {baseline} "
            f"| {row.ratio:.2f}× | {target} | {met} |"
        )
    lines += [f"| {name} | error: {error} | | | | **no** |" for name, error in errors.items()]
    return "\n".join(lines)


def write(results_dir: Path, combined: dict[str, Any], rows: list[Row], markdown: str) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    combined = {**combined, "rows": [{**asdict(r), "met": r.met} for r in rows]}
    (results_dir / "bench.json").write_text(json.dumps(combined, indent=2, default=str))
    (results_dir / "bench.md").write_text(markdown + "\n")
    chart(rows, results_dir / "bench.png", title=combined.get("title", "Nexus benchmarks"))


def chart(rows: list[Row], path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targeted = [row for row in rows if row.target is not None]
    if not targeted:
        return
    figure, axis = plt.subplots(figsize=(10, 0.45 * len(targeted) + 1.6))
    labels = [f"{r.benchmark} ({r.ratio:.2f}× vs {r.target:g}×)" for r in targeted]
    scores = [r.score for r in targeted]
    colours = ["#2e7d32" if r.met else "#c62828" for r in targeted]
    axis.barh(labels, scores, color=colours)
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_xscale("log")
    from matplotlib.ticker import FixedLocator, NullFormatter, StrMethodFormatter

    axis.xaxis.set_major_locator(FixedLocator([0.1, 0.25, 0.5, 1, 2, 4, 8]))
    axis.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.invert_yaxis()
    axis.set_xlabel("ratio relative to its target (log scale; right of 1 = target met)")
    axis.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
