"""A task's request id bound into its logs, and its duration timed (Celery signals).

The id comes in the `request_id` header that the doorbell sets when it rings from within a
request (nexus/adapters/celery_broker.py); a task rung by the timer has none.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import structlog
from celery.signals import task_postrun, task_prerun
from prometheus_client import start_http_server

from nexus.settings import get_settings
from nexus.telemetry import REGISTRY, REQUEST_ID, TASK_DURATION, sane_request_id

log = structlog.get_logger(__name__)
PORTS_TRIED = 64  # a pool of up to this many processes on one host, one port each
_started: dict[str, float] = {}  # task id -> perf_counter at its start
_serving_pid: int | None = None
_serving = threading.Lock()


def request_id_of(request: Any) -> str | None:
    """The request id a task was sent with: Celery puts a custom header on the request
    itself, or (older message protocols) under `headers`."""
    value = getattr(request, REQUEST_ID, None)
    if value is None:
        headers = getattr(request, "headers", None) or {}
        value = headers.get(REQUEST_ID) if isinstance(headers, dict) else None
    return sane_request_id(value) if isinstance(value, str) else None


@task_prerun.connect
def _task_started(task_id: str = "", task: Any = None, **_: Any) -> None:
    _serve_metrics_once()
    structlog.contextvars.unbind_contextvars(REQUEST_ID)  # none left from the last task
    request_id = request_id_of(getattr(task, "request", None))
    if request_id is not None:
        structlog.contextvars.bind_contextvars(**{REQUEST_ID: request_id})
    _started[task_id] = time.perf_counter()


@task_postrun.connect
def _task_done(task_id: str = "", task: Any = None, state: str | None = None, **_: Any) -> None:
    started = _started.pop(task_id, None)
    if started is not None:
        name = getattr(task, "name", None) or "unknown"
        TASK_DURATION.labels(name, state or "UNKNOWN").observe(time.perf_counter() - started)
    structlog.contextvars.unbind_contextvars(REQUEST_ID)


def _serve_metrics_once() -> None:
    """The first task a process runs opens its metrics port, when one is configured: each
    prefork child has its own figures, so each serves them (the first free port up)."""
    global _serving_pid
    port = get_settings().worker_metrics_port
    if port is None or _serving_pid == os.getpid():
        return
    with _serving:
        if _serving_pid == os.getpid():
            return
        _serving_pid = os.getpid()
        for candidate in range(port, min(port + PORTS_TRIED, 65536)):
            try:
                start_http_server(candidate, registry=REGISTRY)
            except OSError:
                continue
            log.info("worker_metrics_serving", port=candidate)
            return
        log.warning("worker_metrics_no_free_port", first=port, tried=PORTS_TRIED)
