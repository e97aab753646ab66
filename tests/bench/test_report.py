"""The report's latency rows: on loopback, Nexus over its floor is targeted at p50 and p99."""

from __future__ import annotations

import pytest

from bench import report


def test_latency_over_its_floor_is_targeted_at_p50_and_p99() -> None:
    ms = {"p50": 20.0, "p95": 22.0, "p99": 30.0, "mean": 21.0}
    floor = {"p50": 10.0, "p95": 11.0, "p99": 12.0, "mean": 10.5}
    trip = {"p50": 4.0, "p95": 5.0, "p99": 6.0, "mean": 4.2}
    found = {"nexus_ms": ms, "floor_ms": floor, "round_trip_ms": trip, "ratio": 5.0}
    rows = {row.benchmark: row for row in report.rows_for("latency", found)}
    p50, p99 = rows["latency p50 over its floor"], rows["latency p99 over its floor"]
    assert p50.ratio == pytest.approx(2.0) and (p50.target, p50.at_least) == (1.25, False)
    assert p99.ratio == pytest.approx(2.5) and (p99.target, p99.at_least) == (1.5, False)
    assert p50.met is False and p99.met is False
