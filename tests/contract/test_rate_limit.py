"""One contract for the send-rate limiter, run against the in-process twin and Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from nexus.adapters.redis_rate_limit import RedisRateLimiter
from nexus.outbound.ports import RateLimiter
from nexus.outbound.rate_limit import InProcessRateLimiter
from tests.services import REDIS_URL


@pytest.fixture(params=["in-process", "redis"])
def limiters(request: pytest.FixtureRequest) -> Iterator[tuple[RateLimiter, RateLimiter]]:
    """Two limiters that share one schedule (two workers), burst 2."""
    if request.param == "in-process":
        one = InProcessRateLimiter(burst=2)
        yield one, one
        return
    request.applymarker(pytest.mark.redis)
    prefix = f"nexus-test-{uuid.uuid4().hex[:8]}:"
    client = redis.Redis.from_url(REDIS_URL)
    yield (
        RedisRateLimiter(client, prefix=prefix, burst=2),
        RedisRateLimiter(redis.Redis.from_url(REDIS_URL), prefix=prefix, burst=2),
    )
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


def test_workers_share_one_schedule_per_platform(
    limiters: tuple[RateLimiter, RateLimiter],
) -> None:
    first, second = limiters
    # 4 per second: 250 ms apart once the burst of 2 is used, whichever worker asks.
    waits = [first.reserve("telegram", 4.0), second.reserve("telegram", 4.0)]
    waits += [first.reserve("telegram", 4.0), second.reserve("telegram", 4.0)]
    assert waits[:2] == [0, 0]
    assert 200 <= waits[2] <= 250 and 450 <= waits[3] <= 500
    assert second.reserve("slack", 4.0) == 0  # another platform has its own schedule


def test_a_rate_must_be_positive(limiters: tuple[RateLimiter, RateLimiter]) -> None:
    with pytest.raises(ValueError, match="positive"):
        limiters[0].reserve("telegram", 0)
