"""Following one request: its id (bound into every log line it causes, carried to the tasks
it rings) and the process's own durations (HTTP requests, Celery tasks) for Prometheus.

The ledger's figures (nexus/api/operations.py) count what every process did; these are
what only this process saw, so each process exposes its own.
"""

from __future__ import annotations

import structlog
from prometheus_client import CollectorRegistry, Histogram

from nexus.ids import new_id

REQUEST_ID_HEADER = "X-Request-ID"
# The name under which the id is bound in the logs and sent as a Celery task header.
REQUEST_ID = "request_id"
MAX_REQUEST_ID_CHARS = 128

# One registry per process, read by the API's /metrics and by a worker's metrics port.
REGISTRY = CollectorRegistry(auto_describe=True)
HTTP_DURATION = Histogram(
    "nexus_http_request_duration_seconds",
    "HTTP requests answered by this API process, by route template and status code.",
    ["route", "status"],
    registry=REGISTRY,
)
TASK_DURATION = Histogram(
    "nexus_task_duration_seconds",
    "Celery tasks run by this worker process, by task name and outcome.",
    ["task", "state"],
    registry=REGISTRY,
    # A turn can take minutes; a ring of the router takes milliseconds.
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)


def sane_request_id(value: str | None) -> str | None:
    """A caller's id as given, if it can go into a log line and a header unchanged:
    1 to 128 printable ASCII characters (no control characters, no spaces)."""
    if not value or len(value) > MAX_REQUEST_ID_CHARS:
        return None
    if not all("!" <= char <= "~" for char in value):
        return None
    return value


def request_id_for(given: str | None) -> str:
    """The caller's id when it is sane, else a fresh one."""
    return sane_request_id(given) or new_id()


def current_request_id() -> str | None:
    """The id bound in this context's logs (an API request's, or a task's), if any."""
    value = structlog.contextvars.get_contextvars().get(REQUEST_ID)
    return value if isinstance(value, str) else None
