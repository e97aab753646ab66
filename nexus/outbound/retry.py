"""When to try a failed chunk again: a pure decision over attempts and the platform's word."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """`max_attempts` in all; waits of `first_delay_ms` doubling up to `max_delay_ms`."""

    max_attempts: int = 3
    first_delay_ms: int = 1_000
    max_delay_ms: int = 30_000

    def delay_ms(self, attempts_made: int, retry_after_ms: int | None = None) -> int | None:
        """The wait before the next attempt, or None when the attempts are spent.

        A platform's own `retry_after` wins over a shorter backoff: sending sooner only
        earns another 429 (and, on Telegram, a longer ban)."""
        if attempts_made >= self.max_attempts:
            return None
        doublings = max(attempts_made - 1, 0)
        backoff: int = min(self.first_delay_ms * (1 << doublings), self.max_delay_ms)
        return max(backoff, retry_after_ms or 0)
