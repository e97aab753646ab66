"""Send-rate limiting by GCRA (the generic cell rate algorithm), and its in-process twin.

GCRA keeps one number per key, the theoretical arrival time (TAT) of the next send, so the
Redis version is one small script and every worker shares the same schedule.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Sends allowed back to back before the rate applies (a reply's chunks go out together).
DEFAULT_BURST = 3


def emission_interval_ms(per_second: float) -> float:
    if per_second <= 0:
        raise ValueError(f"a send rate must be positive, got {per_second}")
    return 1000.0 / per_second


def gcra(
    tat_ms: float | None, now_ms: float, interval_ms: float, burst: int = DEFAULT_BURST
) -> tuple[int, float]:
    """Book one slot: returns (ms to wait, the new TAT). Pure, so both twins share it."""
    tat = now_ms if tat_ms is None or tat_ms < now_ms else tat_ms
    tolerance = interval_ms * (burst - 1)
    wait = max(0.0, tat - tolerance - now_ms)
    return round(wait), tat + interval_ms


@dataclass
class InProcessRateLimiter:
    """For the embedded mode and unit tests: one process, one schedule."""

    burst: int = DEFAULT_BURST
    clock: Callable[[], float] = field(default=lambda: time.monotonic() * 1000)
    _tat: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reserve(self, key: str, per_second: float) -> int:
        interval = emission_interval_ms(per_second)
        with self._lock:
            wait, self._tat[key] = gcra(self._tat.get(key), self.clock(), interval, self.burst)
        return wait
