"""Start a real Celery worker process against the test Postgres and Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.services import REDIS_URL

ROOT = Path(__file__).resolve().parents[2]


def worker_environment(database_url: str) -> dict[str, str]:
    """Settings for a worker isolated from other runs sharing this Redis."""
    return {
        "NEXUS_DATABASE_URL": database_url,
        "NEXUS_REDIS_URL": REDIS_URL,
        "NEXUS_BROKER_PREFIX": f"nexus-test-{uuid.uuid4().hex[:8]}:",
    }


@contextmanager
def celery_worker(
    environment: dict[str, str],
    log_path: Path,
    *,
    queues: str = "events",
    timeout: float = 60,
    threads: int = 0,
    app: str = "workers.main",
) -> Iterator[subprocess.Popen[bytes]]:
    """A `celery worker` subprocess, ready to consume when the block starts.

    `threads` > 0 runs a thread pool of that size (events are routed while a turn runs, as
    with any concurrency above one); 0 runs the solo pool. `app` may name a test module that
    wraps the real app (fault injection).
    """
    log = log_path.open("wb")
    pool = ["-P", "threads", "-c", str(threads)] if threads else ["-P", "solo"]
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues,
         *pool, "--without-gossip", "--without-mingle", "--without-heartbeat",
         "-l", "INFO"],
        cwd=ROOT,
        env={**os.environ, **environment},
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while b"ready." not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield process
    finally:
        stop(process)
        log.close()


def stop(process: subprocess.Popen[bytes], *, timeout: float = 20) -> None:
    """Ask a test's process to stop (SIGTERM, as an orchestrator would), then insist."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for(condition: object, *, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
