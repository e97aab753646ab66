"""The send-rate limiter over Redis: GCRA in one script, on Redis's clock, for all workers."""

from __future__ import annotations

from typing import Any

import redis

from nexus.outbound.rate_limit import DEFAULT_BURST, emission_interval_ms

# The same arithmetic as nexus.outbound.rate_limit.gcra, atomically, with the server's time
# (workers' clocks disagree; Redis's is the one they share).
_GCRA = """
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait < 0 then wait = 0 end
local next_tat = tat + interval
redis.call('SET', KEYS[1], tostring(next_tat), 'PX', math.ceil(next_tat - now + interval))
return math.floor(wait + 0.5)
"""


class RedisRateLimiter:
    def __init__(self, client: redis.Redis, *, prefix: str = "nexus:", burst: int = DEFAULT_BURST):
        self._redis = client
        self._prefix = prefix
        self._burst = burst
        self._script: Any = client.register_script(_GCRA)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "nexus:") -> RedisRateLimiter:
        return cls(redis.Redis.from_url(url), prefix=prefix)

    def reserve(self, key: str, per_second: float) -> int:
        interval = emission_interval_ms(per_second)
        tolerance = interval * (self._burst - 1)
        return int(self._script(keys=[f"{self._prefix}rate:{key}"], args=[interval, tolerance]))
