"""The watchdog's backlog check (`runs_waiting`) counts the session runs waiting in the
broker, with a broker key prefix as without one: a count of 0 under a prefix would let the
watchdog ring every session whose work waits behind a backlog, deepening it."""

from __future__ import annotations

import uuid

import pytest
import redis

from nexus.adapters.celery_broker import create_celery, runs_waiting
from nexus.settings import Settings
from tests.services import REDIS_URL

pytestmark = [pytest.mark.redis]


@pytest.mark.parametrize("prefixed", [True, False])
def test_runs_waiting_counts_the_session_runs_in_the_broker(prefixed: bool) -> None:
    prefix = f"test-waiting-{uuid.uuid4().hex[:8]}:" if prefixed else None
    app = create_celery(Settings(redis_url=REDIS_URL, broker_prefix=prefix))
    client = redis.Redis.from_url(REDIS_URL)
    # Unprefixed, the queue's key is shared by this Redis database: a name of our own.
    queue = "sessions" if prefixed else f"test-waiting-{uuid.uuid4().hex[:8]}"
    key = f"{prefix or ''}{queue}"
    try:
        assert runs_waiting(app, queue) == 0
        client.lpush(key, "run-1", "run-2", "run-3")
        assert runs_waiting(app, queue) == 3
    finally:
        client.delete(key)
        client.close()
        app.close()
