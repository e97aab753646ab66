"""The circuit breaker (docs/hooks.md, "Hooks"): 5 errors in a row open it; after 5 minutes one
trial is let through (half-open); a success closes it, a failure re-opens it."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.ledger.enums import BreakerState

ERRORS_TO_OPEN = 5
COOL_DOWN_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class Breaker:
    state: BreakerState = BreakerState.CLOSED
    consecutive_errors: int = 0
    opened_at: int | None = None


def admit(breaker: Breaker, now_ms: int) -> tuple[bool, Breaker]:
    """May the hook run now? An open breaker past its cool-down becomes half-open."""
    if breaker.state == BreakerState.CLOSED or breaker.state == BreakerState.HALF_OPEN:
        return True, breaker
    if breaker.opened_at is not None and now_ms - breaker.opened_at >= COOL_DOWN_MS:
        return True, Breaker(BreakerState.HALF_OPEN, breaker.consecutive_errors, breaker.opened_at)
    return False, breaker


def record(breaker: Breaker, *, ok: bool, now_ms: int) -> Breaker:
    if ok:
        return Breaker()
    errors = breaker.consecutive_errors + 1
    if breaker.state == BreakerState.HALF_OPEN or errors >= ERRORS_TO_OPEN:
        return Breaker(BreakerState.OPEN, errors, now_ms)
    return Breaker(BreakerState.CLOSED, errors, None)
