"""The watchdog's look at the broker (`runs_waiting`) on the real Redis broker: how many
session runs wait for a worker.

Each test has a broker key prefix and a queue name of its own, so no other test (nor
another run on the same Redis) can add to or take from what it counts; and each checks
that its app really talks to Redis, not to the in-process transport, whose queues are
shared by every app in the process (a broker URL the settings ignore falls back to it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from celery import Celery

from nexus.adapters.celery_broker import create_celery, runs_waiting
from nexus.settings import Settings
from tests.services import REDIS_URL

pytestmark = pytest.mark.redis


def _app(redis_url: str = REDIS_URL) -> Celery:
    app = create_celery(Settings(redis_url=redis_url, broker_prefix=f"nexus-test-{_name()}:"))
    assert app.connection_for_read().transport.driver_type == "redis"
    return app


def _name() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture
def app() -> Iterator[Celery]:
    made = _app()
    try:
        yield made
    finally:
        made.close()


def _publish(app: Celery, queue: str, count: int) -> None:
    for n in range(count):
        app.send_task("nexus.session.run", args=[f"session-{n}"], queue=queue)


def _take_one(app: Celery, queue: str) -> None:
    """What a worker does: take the next task off the queue."""
    with app.connection_for_write() as connection:
        message = app.amqp.queues[queue].bind(connection.default_channel).get(no_ack=True)
    assert message is not None


def test_published_runs_are_counted_until_workers_take_them(app: Celery) -> None:
    queue = f"sessions-{_name()}"
    assert runs_waiting(app, queue) == 0  # never used: Redis keeps no empty list
    _publish(app, queue, 3)
    counts = [runs_waiting(app, queue)]
    for _ in range(3):
        _take_one(app, queue)
        counts.append(runs_waiting(app, queue))
    assert counts == [3, 2, 1, 0]


def test_only_the_deployments_own_queue_is_counted(app: Celery) -> None:
    """Another deployment (another key prefix) on the same Redis, with a queue of the same
    name, adds nothing; nor does another queue of ours."""
    queue = f"sessions-{_name()}"
    other = _app()
    try:
        _publish(other, queue, 2)
        _publish(app, queue, 1)
        _publish(app, f"events-{_name()}", 4)
        assert (runs_waiting(app, queue), runs_waiting(other, queue)) == (1, 2)
    finally:
        other.close()


def test_a_broker_out_of_reach_cannot_say() -> None:
    unreachable = _app("redis://127.0.0.1:1/15")  # nothing listens on port 1
    unreachable.conf.broker_connection_timeout = 1  # give up after one retry
    try:
        assert runs_waiting(unreachable, f"sessions-{_name()}") is None
    finally:
        unreachable.close()
