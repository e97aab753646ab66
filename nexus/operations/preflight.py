"""What must hold before a worker starts, as pure checks (the caller reads Redis)."""

from __future__ import annotations

# Redis policies that may delete keys under memory pressure: a deleted lease, queued task
# or stream entry is work silently dropped by the broker (the ledger would re-ring it,
# but only at the next tick, and a lost task message is a stalled session until then).
SAFE_MAXMEMORY_POLICIES = frozenset({"noeviction"})


def worker_problems(
    *,
    maxmemory_policy: str | None,
    visibility_timeout_s: float,
    turn_time_limit_s: float,
) -> list[str]:
    """Each reason this worker must not start, with what to change; empty when all is well."""
    problems: list[str] = []
    if maxmemory_policy is not None and maxmemory_policy not in SAFE_MAXMEMORY_POLICIES:
        problems.append(
            f"Redis maxmemory-policy is {maxmemory_policy!r}: it may evict task messages and "
            "leases. Set `maxmemory-policy noeviction` (redis.conf, or CONFIG SET)."
        )
    if visibility_timeout_s <= turn_time_limit_s:
        problems.append(
            f"the broker's visibility timeout ({visibility_timeout_s:.0f} s) is not longer "
            f"than the turn time limit ({turn_time_limit_s:.0f} s): a slow turn would be "
            "handed to a second worker while it still runs. Raise "
            "NEXUS_VISIBILITY_TIMEOUT_SECONDS or lower NEXUS_TURN_TIME_LIMIT_SECONDS."
        )
    return problems
