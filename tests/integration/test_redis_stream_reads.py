"""A blocking stream read on Redis outlasts the client's socket timeout (the SSE route
waits 15 s; redis-py's sockets time out after 5): it waits in slices and returns empty,
never a TimeoutError that would end the stream."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio

from nexus.adapters.redis_coordination import RedisCoordination
from tests.services import REDIS_URL

pytestmark = pytest.mark.redis
SOCKET_TIMEOUT_S = 1.0  # short, so the test waits well past it without taking long


@pytest.fixture
def short_timeouts() -> Iterator[RedisCoordination]:
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=SOCKET_TIMEOUT_S)
    prefix = f"nexus-test-{uuid.uuid4().hex[:8]}:"
    yield RedisCoordination(
        client,
        prefix=prefix,
        streams=lambda: redis.asyncio.Redis.from_url(REDIS_URL, socket_timeout=SOCKET_TIMEOUT_S),
    )
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_a_blocking_read_waits_past_the_socket_timeout(short_timeouts: RedisCoordination) -> None:
    began = time.monotonic()
    assert short_timeouts.read_stream("quiet", "0-0", block_ms=2_500) == []
    assert time.monotonic() - began >= 2.4


def test_an_async_blocking_read_waits_past_the_socket_timeout_and_wakes_for_an_event(
    short_timeouts: RedisCoordination,
) -> None:
    async def scenario() -> tuple[float, list[str]]:
        began = time.monotonic()
        assert await short_timeouts.read_stream_async("quiet", "0-0", block_ms=2_500) == []
        waited = time.monotonic() - began
        start = await short_timeouts.stream_tail_async("later")
        reader = asyncio.create_task(
            short_timeouts.read_stream_async("later", start, block_ms=5_000)
        )
        await asyncio.sleep(2.2)  # two socket timeouts into the wait
        short_timeouts.publish("later", "session.started", {})
        return waited, [entry.type for entry in await reader]

    waited, seen = asyncio.run(scenario())
    assert waited >= 2.4
    assert seen == ["session.started"]
