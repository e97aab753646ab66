"""A task carries the request id it was rung with into its logs, and is timed.

Real Celery: the doorbell publishes on an in-memory broker and the message is read back;
a task run through Celery's own tracer fires the signals the worker uses."""

from __future__ import annotations

from typing import Any

import structlog
from celery import Celery
from structlog.contextvars import bound_contextvars

from nexus.adapters.celery_broker import CeleryDoorbell
from nexus.telemetry import REGISTRY, REQUEST_ID, current_request_id
from workers.telemetry import request_id_of


def _published(app: Celery) -> list[dict[str, Any]]:
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue("sessions")
        found = []
        while queue.qsize():
            message = queue.get(timeout=1)
            found.append(dict(message.headers))
            message.ack()
        queue.close()
    return found


def test_a_ring_from_within_a_request_carries_its_id_and_one_without_carries_none() -> None:
    app = Celery("t", broker="memory://")
    app.conf.task_routes = {"nexus.session.*": {"queue": "sessions"}}
    doorbell = CeleryDoorbell(app)
    with bound_contextvars(**{REQUEST_ID: "req-42"}):
        doorbell.session_has_work("s1")
    doorbell.session_has_work("s2")
    headers = _published(app)
    assert [h.get(REQUEST_ID) for h in headers] == ["req-42", None]
    assert [h["argsrepr"] for h in headers] == ["['s1']", "['s2']"]


def test_a_task_binds_the_id_it_was_sent_with_and_is_timed() -> None:
    app = Celery("t", broker="memory://")
    seen: list[str | None] = []

    @app.task(name="nexus.test.traced")  # type: ignore[untyped-decorator]
    def traced() -> None:
        seen.append(current_request_id())
        structlog.get_logger().info("inside")

    def count() -> float:
        value = REGISTRY.get_sample_value(
            "nexus_task_duration_seconds_count", {"task": "nexus.test.traced", "state": "SUCCESS"}
        )
        return value or 0.0

    before = count()
    traced.apply(headers={REQUEST_ID: "req-7"})
    traced.apply()
    assert seen == ["req-7", None]  # nothing left over from the task before
    assert current_request_id() is None
    assert count() == before + 2


def test_only_a_sane_id_is_taken_from_a_task() -> None:
    class Request:
        headers = {REQUEST_ID: "bad id\n"}

    assert request_id_of(Request()) is None
    Request.headers = {REQUEST_ID: "x" * 129}
    assert request_id_of(Request()) is None
    Request.headers = {REQUEST_ID: "ok-1"}
    assert request_id_of(Request()) == "ok-1"
