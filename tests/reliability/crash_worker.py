"""The real worker app, made to die (os._exit) right after its first turn commits and
before Celery acks the task: `celery -A tests.reliability.crash_worker worker`.

The trap is set when the Celery worker starts, not on import: the test suite imports this
module too (for EXIT_CODE), and a trap set there would end the test process itself."""

from __future__ import annotations

import logging
import os
import sys

from celery.signals import worker_init

from workers.main import app

__all__ = ["app"]
EXIT_CODE = 137  # what a SIGKILL would leave


class _DieAfterCommit(logging.Handler):
    """Sees the runner's `turn_committed` record, which is logged once the turn's unit of
    work has committed and before the task returns (and so before the late ack)."""

    def emit(self, record: logging.LogRecord) -> None:
        event = record.msg if isinstance(record.msg, dict) else {}
        if event.get("event") == "turn_committed":
            sys.stderr.write(f"crash_after_commit turn_id={event.get('turn_id')}\n")
            sys.stderr.flush()
            os._exit(EXIT_CODE)


def _set_trap(**_: object) -> None:
    logging.getLogger("nexus.sessions.runner").addHandler(_DieAfterCommit())


worker_init.connect(_set_trap, weak=False)
