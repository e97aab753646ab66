"""`nexus status`: what is wrong with a running deployment, decided from what was found
(pure; the API gathers the facts: workers that answered a ping, the timer's last tick,
Redis's eviction policy)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nexus.operations.preflight import SAFE_MAXMEMORY_POLICIES

# The beat rings the timer every 60 s: three minutes without a tick is three missed.
BEAT_STALE_MS = 180_000
# How long the status waits for workers to answer a ping.
PING_TIMEOUT_S = 1.0

# The workers alive: each one that answers a ping within `timeout_s`, by name.
WorkerPing = Callable[[float], list[str]]


@dataclass(frozen=True)
class Facts:
    now_ms: int
    workers: list[str] | None  # None: the broker could not be asked (the reason beside it)
    workers_error: str | None
    last_tick_at: int | None  # when the timer's watermark last moved; None: never
    maxmemory_policy: str | None  # None: no Redis, or it would not say
    redis_error: str | None


def problems(facts: Facts, *, beat_stale_ms: int = BEAT_STALE_MS) -> list[str]:
    """Each thing wrong, in words an operator acts on; empty when all is well."""
    found: list[str] = []
    if facts.workers is None:
        found.append(f"cannot ask the workers: {facts.workers_error}")
    elif not facts.workers:
        found.append("no worker answered a ping: nothing runs turns (start `nexus worker`)")
    if facts.last_tick_at is None:
        found.append("the timer never ticked: is `nexus beat` running?")
    elif facts.now_ms - facts.last_tick_at > beat_stale_ms:
        age_s = (facts.now_ms - facts.last_tick_at) // 1000
        found.append(
            f"the timer last ticked {age_s} s ago (more than {beat_stale_ms // 1000} s): "
            "is `nexus beat` running?"
        )
    if facts.redis_error is not None:
        found.append(f"Redis: {facts.redis_error}")
    if facts.maxmemory_policy is not None and facts.maxmemory_policy not in SAFE_MAXMEMORY_POLICIES:
        found.append(
            f"Redis maxmemory-policy is {facts.maxmemory_policy!r}: it may evict task messages "
            "and leases. Set `maxmemory-policy noeviction`."
        )
    return found
