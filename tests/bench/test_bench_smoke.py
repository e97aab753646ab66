"""The benchmark suite runs end to end (`python -m bench --quick`) and reports every
benchmark with finite, positive figures. A smoke test of the instrument, not a judgement
of the figures: those are ratios for a quiet machine, not for a busy CI run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import BENCHMARKS
from tests.services import PG_ADMIN_URL, REDIS_URL

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
# Minutes even in quick form; tests/bench/test_scale_smoke.py runs each small instead.
AT_SCALE = ("sessions", "storage")
SMOKED = tuple(name for name in BENCHMARKS if name not in AT_SCALE)


def test_the_quick_suite_reports_every_benchmark(tmp_path: Path) -> None:
    ran = subprocess.run(
        [
            *(sys.executable, "-m", "bench", "--quick", "--results", str(tmp_path)),
            *("--only", ",".join(SMOKED)),
        ],
        cwd=ROOT,
        # The servers the tests use (the suite makes its own databases and key prefix).
        env={
            **os.environ,
            "NEXUS_BENCH_POSTGRES_URL": PG_ADMIN_URL,
            "NEXUS_BENCH_REDIS_URL": REDIS_URL,
        },
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    combined = json.loads((tmp_path / "bench.json").read_text())
    assert set(combined["benchmarks"]) == set(SMOKED)
    assert not [name for name, found in combined["benchmarks"].items() if "error" in found]
    reported = {row["benchmark"].split(",")[0] for row in combined["rows"]}
    assert len(combined["rows"]) >= len(SMOKED)
    for row in combined["rows"]:
        for key in ("nexus", "baseline", "ratio"):
            assert math.isfinite(row[key]) and row[key] > 0, (row["benchmark"], key, row[key])
    assert {"pipeline events/s", "latency p50"} <= reported
    for name in SMOKED:
        assert (tmp_path / f"{name}.json").is_file()
    assert (tmp_path / "bench.png").stat().st_size > 1000
    assert "| benchmark | Nexus | baseline | ratio | target | met? |" in ran.stdout
