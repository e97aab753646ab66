"""The watchdog's look at the broker: how many session runs wait for a worker, on the real
Redis broker (under a key prefix of its own)."""

from __future__ import annotations

import uuid

import pytest

from nexus.adapters.celery_broker import create_celery, runs_waiting
from nexus.settings import Settings
from tests.services import REDIS_URL

pytestmark = pytest.mark.redis


def test_published_session_runs_are_counted_until_a_worker_takes_them() -> None:
    prefix = f"nexus-test-{uuid.uuid4().hex[:8]}:"
    app = create_celery(Settings(broker_url=REDIS_URL, broker_prefix=prefix))
    try:
        assert runs_waiting(app) == 0  # no queue yet: Redis keeps no empty list
        for n in range(3):
            app.send_task("nexus.session.run", args=[f"session-{n}"])
        assert runs_waiting(app) == 3
        assert runs_waiting(app, "events") == 0
        with app.connection_for_write() as connection:
            connection.default_channel.queue_purge("sessions")
        assert runs_waiting(app) == 0
    finally:
        app.close()
