"""Nexus's benchmark suite: every figure a ratio against a baseline measured in the same run.

    python -m bench                 # everything (several minutes)
    python -m bench --quick         # a smoke run of everything (a minute or two)
    python -m bench --only pipeline,latency
    python -m bench --rtt-ms 0.5,1,2   # pipeline and latency across a delayed link

Prints one Markdown table; writes bench/results/<name>.json, bench.json, bench.md and
bench.png. Needs PostgreSQL and Redis on loopback (NEXUS_BENCH_POSTGRES_URL,
NEXUS_BENCH_REDIS_URL) and the bench extra: pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

BENCHMARKS = (
    "pipeline",
    "latency",
    "depth",
    "peer",
    "scaling",
    "footprint",
    "ledger",
    "streams",
    "prompt_cache",
    "sessions",
    "storage",
)
# What `--rtt-ms` runs at each round trip: the two whose ratios distance can move.
AT_DISTANCE = ("pipeline", "latency")
NEEDS = ("psutil", "matplotlib", "langgraph.checkpoint.postgres", "psycopg")


def _missing() -> list[str]:
    missing = []
    for name in NEEDS:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _run_one(name: str, quick: bool, rtt_ms: float | None = None) -> dict[str, Any]:
    if rtt_ms is not None:
        from bench import harness

        # Every side's processes (and the sketch's publisher) through the same proxies.
        with harness.distance(rtt_ms) as measured:
            found = _run_one(name, quick)
        found["distance"] = measured
        return found
    if name == "ledger":
        from bench import harness, ledger

        return ledger.run(quick=quick, admin_url=harness.ADMIN_URL)
    module = importlib.import_module(f"bench.{name}")
    result: dict[str, Any] = module.run(quick=quick)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: smaller, shorter")
    parser.add_argument("--only", help=f"comma-separated subset of: {','.join(BENCHMARKS)}")
    parser.add_argument("--results", type=Path, help="where to write (default bench/results)")
    parser.add_argument(
        "--rtt-ms",
        help="comma-separated round trips (ms) to add between every process and Postgres/"
        f"Redis; runs {' and '.join(AT_DISTANCE)} at each (with --only: a subset of them)",
    )
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {BENCHMARKS}")
    runs: list[tuple[str, float | None]] = [(name, None) for name in chosen]
    if args.rtt_ms:
        try:
            rtts = [float(value) for value in args.rtt_ms.split(",")]
        except ValueError:
            parser.error(f"--rtt-ms takes round trips in ms, like 0.5,1,2; not {args.rtt_ms!r}")
        # 0 is allowed: the proxies with no delay, what they cost on their own.
        if any(rtt < 0 for rtt in rtts):
            parser.error(f"--rtt-ms takes round trips of 0 ms or more, not {args.rtt_ms!r}")
        at = [name for name in chosen if name in AT_DISTANCE] if args.only else AT_DISTANCE
        if not at:
            parser.error(f"--rtt-ms runs {' and '.join(AT_DISTANCE)}; --only names neither")
        runs = [(name, rtt) for rtt in rtts for name in at]
    missing = _missing()
    if missing:
        print(
            f"The benchmark suite needs {', '.join(missing)}, which are not installed.\n"
            "Install the bench extra:  pip install -e '.[bench]'",
            file=sys.stderr,
        )
        return 2

    from bench import harness, report

    results_dir = args.results or harness.RESULTS
    results_dir.mkdir(parents=True, exist_ok=True)
    combined: dict[str, Any] = {"machine": harness.machine(), "quick": args.quick}
    combined["benchmarks"] = {}
    errors: dict[str, str] = {}
    rows: list[report.Row] = []
    started = time.monotonic()
    for base, rtt in runs:
        name = base if rtt is None else f"{base}-rtt{rtt:g}ms"
        print(f"==> {name}", file=sys.stderr, flush=True)
        began = time.monotonic()
        try:
            result = _run_one(base, args.quick, rtt)
        except Exception as error:
            traceback.print_exc()
            errors[name] = f"{type(error).__name__}: {error}".splitlines()[0][:200]
            result = {"error": errors[name]}
        result["elapsed_s"] = time.monotonic() - began
        print(f"    {result['elapsed_s']:.0f} s", file=sys.stderr, flush=True)
        combined["benchmarks"][name] = result
        (results_dir / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
        rows += report.rows_for(base, result)
    combined["elapsed_s"] = time.monotonic() - started
    markdown = report.table(rows, errors)
    kind = "quick smoke run" if args.quick else "full run"
    machine = combined["machine"]
    combined["title"] = f"Nexus benchmarks ({kind}, {machine['cores']} cores, {machine['date']})"
    report.write(results_dir, combined, rows, markdown)
    print(markdown)
    print(
        f"\n{combined['elapsed_s']:.0f} s ({kind}); results in {results_dir}/ "
        "(bench.json, bench.md, bench.png, one JSON per benchmark)"
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
