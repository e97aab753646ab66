"""The reliability suite's crash worker dies after a commit only as a Celery worker: the
suite imports it too (for its exit code), and a trap set on import would end pytest."""

from __future__ import annotations

import logging

import tests.reliability.crash_worker as crash_worker


def test_importing_the_crash_worker_sets_no_trap_in_this_process() -> None:
    runner_log = logging.getLogger("nexus.sessions.runner")
    assert crash_worker.EXIT_CODE == 137
    assert not [h for h in runner_log.handlers if type(h).__name__ == "_DieAfterCommit"]
