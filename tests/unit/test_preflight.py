"""A worker refuses to start where it would lose or double work."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.operations.preflight import worker_problems
from tests.support import free_port, port_open

NEXUS = Path(sys.prefix) / "bin" / "nexus"


def test_noeviction_and_a_long_visibility_timeout_pass() -> None:
    assert worker_problems(
        maxmemory_policy="noeviction", visibility_timeout_s=1260, turn_time_limit_s=600
    ) == []  # fmt: skip


def test_an_evicting_policy_and_a_short_visibility_timeout_are_refused_with_the_fix() -> None:
    problems = worker_problems(
        maxmemory_policy="allkeys-lru", visibility_timeout_s=300, turn_time_limit_s=600
    )
    assert len(problems) == 2
    assert "allkeys-lru" in problems[0] and "noeviction" in problems[0]
    assert "300 s" in problems[1] and "NEXUS_VISIBILITY_TIMEOUT_SECONDS" in problems[1]


@pytest.fixture
def evicting_redis(tmp_path: Path) -> Iterator[str]:
    """A second, throwaway Redis configured the way a worker must refuse."""
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--maxmemory-policy", "allkeys-lru", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not port_open(port):
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.redis
def test_nexus_worker_refuses_an_evicting_redis(evicting_redis: str) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NEXUS_")}
    environment["NEXUS_REDIS_URL"] = evicting_redis
    done = subprocess.run(
        [str(NEXUS), "worker"], env=environment, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing to start" in done.stderr and "allkeys-lru" in done.stderr
