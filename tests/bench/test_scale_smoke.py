"""The benchmarks for distance, many sessions and storage run in small forms and report
what they should: the delaying proxy delays and carries the processes' traffic, the tick
costs are counted, idle sessions' Redis keys are found, the tables are sized. Smoke tests
of the instruments, never of the figures' targets (a busy CI machine says nothing of
those)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, text

from bench import harness, report, sessions, storage
from bench.__main__ import main
from bench.wire import proxy
from tests.services import PG_ADMIN_URL, REDIS_URL

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _test_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers the tests use (each benchmark makes its own databases and key prefix)."""
    monkeypatch.setattr(harness, "ADMIN_URL", PG_ADMIN_URL)
    monkeypatch.setattr(harness, "REDIS_URL", REDIS_URL)


def _finite_rows(rows: list[report.Row]) -> None:
    assert rows
    for row in rows:
        for value in (row.nexus, row.baseline, row.ratio):
            assert math.isfinite(value) and value >= 0, (row.benchmark, value)


def test_the_wire_delays_each_round_trip_by_what_it_is_told() -> None:
    client = redis.Redis.from_url(REDIS_URL)
    target = client.connection_pool.connection_kwargs
    with proxy((target["host"], target["port"]), rtt_ms=20) as port:
        through = redis.Redis(host="127.0.0.1", port=port, db=target.get("db", 0))
        assert through.ping()
        started = time.perf_counter()
        for _ in range(3):
            through.ping()
        # A lower bound only: 10 ms each way is the least a round trip can take.
        assert (time.perf_counter() - started) * 1000 >= 3 * 20
        through.set("wire-test", b"x" * 200_000, ex=10)  # larger than a chunk: order kept
        assert through.get("wire-test") == b"x" * 200_000
        through.close()
    client.close()


def test_within_a_distance_the_processes_reach_the_servers_through_the_proxies(
    tmp_path: Path,
) -> None:
    url = harness.ADMIN_URL
    with harness.distance(1) as measured:
        env = harness.nexus_environment(url, "p:", tmp_path)
        assert env["NEXUS_DATABASE_URL"] != url and env["NEXUS_REDIS_URL"] != REDIS_URL
        assert measured["redis_ping_proxied_ms"] >= 1 > measured["redis_ping_direct_ms"]
        engine = create_engine(env["NEXUS_DATABASE_URL"])
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar_one() == 1
        engine.dispose()
        assert redis.Redis.from_url(env["NEXUS_REDIS_URL"]).ping()
    # Outside the block: straight again.
    assert harness.nexus_environment(url, "p:", tmp_path)["NEXUS_DATABASE_URL"] == url


def test_rtt_takes_round_trips_of_zero_or_more_and_only_what_distance_runs() -> None:
    for bad in (["--rtt-ms", "one"], ["--rtt-ms", "-1"], ["--rtt-ms", "1", "--only", "depth"]):
        with pytest.raises(SystemExit) as stopped:
            main(bad)
        assert stopped.value.code == 2


def test_rtt_runs_each_benchmark_within_the_distance_and_reports_the_floor_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import latency

    seen: list[dict[str, str]] = []

    def fake_latency(*, quick: bool) -> dict[str, object]:
        # What the real one's processes would be given, while it runs.
        seen.append(harness.nexus_environment(harness.ADMIN_URL, "p:", tmp_path))
        ms = {"p50": 12.0, "p95": 14.0, "p99": 15.0, "mean": 12.5}
        return {"nexus_ms": ms, "floor_ms": {**ms, "p50": 10.0}, "round_trip_ms": ms}

    monkeypatch.setattr(latency, "run", fake_latency)
    args = ["--quick", "--rtt-ms", "1,2", "--only", "latency", "--results", str(tmp_path)]
    assert main(args) == 0
    assert len(seen) == 2
    for env in seen:  # through the proxies, each run its own
        assert env["NEXUS_DATABASE_URL"] != harness.ADMIN_URL
        assert env["NEXUS_REDIS_URL"] != REDIS_URL
    found = json.loads((tmp_path / "latency-rtt1ms.json").read_text())
    assert found["distance"]["rtt_ms"] == 1
    assert found["distance"]["redis_ping_proxied_ms"] >= 1
    combined = json.loads((tmp_path / "bench.json").read_text())
    assert set(combined["benchmarks"]) == {"latency-rtt1ms", "latency-rtt2ms"}
    [targeted] = [row for row in combined["rows"] if row["target"] is not None]
    assert targeted["benchmark"].startswith("latency p50 over its floor, RTT 1 ms")
    assert targeted["target"] == 1.3 and not targeted["at_least"]
    assert targeted["ratio"] == pytest.approx(1.2)


def test_many_sessions_counts_ticks_and_finds_idle_sessions_keys() -> None:
    found = sessions.run(quick=True, many=20, few=10, per_session=1, concurrency=4)
    assert found["concurrency"] == 4
    for side, count in (("few", 10), ("many", 20)):
        result = found[side]
        assert result["sessions"] == count
        for loop in ("closed", "open"):
            timed = result[loop]
            assert timed["loop"] == loop
            assert timed["events"] == 20 and timed["events_per_s"] > 0
            assert timed["latency_ms"]["samples"] == 20
        # Closed loop: one message in flight per conversation, so one event a turn.
        assert result["closed"]["turns"] == 20
        assert result["redis"]["sessions"] == count
        for kind in result["redis"]["kinds"].values():
            assert kind["keys"] >= 1 and kind["bytes_per_key"] > 0
        for tick in ("watchdog", "relay"):
            # Counting works: each look reads the ledger at least once.
            assert result["ticks"][tick]["sql_per_tick"] >= 1
            assert result["ticks"][tick]["ms_per_tick"] > 0
    assert set(found["tick_growth"]) == {"watchdog", "relay"}
    _finite_rows(report.rows_for("sessions", found))


def test_storage_sizes_each_sides_tables() -> None:
    found = storage.run(quick=True, turns=20)
    assert found["nexus_bytes_per_turn"] > 0 and found["langgraph_bytes_per_turn"] > 0
    assert "messages" in found["nexus_tables_bytes_per_turn"]
    assert "checkpoints" in found["langgraph_tables_bytes_per_turn"]
    # Prose compresses as prose does; the short pair's blobs far more (what flattered them).
    assert 1.3 < found["text_pglz_ratio"] < 4
    assert found["short"]["langgraph_blob_pglz_ratio"] > 2 * found["langgraph_blob_pglz_ratio"]
    assert found["text_bytes_per_turn"] > 20 * found["short"]["text_bytes_per_turn"]
    _finite_rows(rows := report.rows_for("storage", found))
    assert len(rows) == 3
