"""What a finished hook call writes back, decided against the hook's row as it is now."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nexus.hooks.breaker import Breaker, admit, record
from nexus.ledger.enums import BreakerState
from nexus.ledger.records import HookRecord


@dataclass(frozen=True)
class Settled:
    breaker: Breaker
    state: dict[str, Any]
    enabled: bool
    fires: bool  # the call fired and its firing stands (the hook was not switched off)


def settle(
    now: HookRecord,
    *,
    state_before: Mapping[str, Any],
    state_after: Mapping[str, Any],
    ok: bool,
    fired: bool,
    one_shot: bool,
    disable: bool,
    now_ms: int,
) -> Settled:
    """The hook's row after one call, from the row as it is now (read under its lock), not
    as the call found it: other calls of the same hook may have finished meanwhile.

    Their errors count toward the breaker too; a hook switched off while the call ran (by
    hand, by `disable_hook`, or by a one-shot's firing) stays off and this call does not
    fire; the call's changes to its state are applied key by key over theirs.
    """
    switched_off = not now.enabled
    # An open breaker whose cool-down has passed is the half-open one this call was let in by.
    _, breaker = admit(
        Breaker(BreakerState(now.breaker_state), now.consecutive_errors, now.opened_at), now_ms
    )
    fires = fired and not switched_off
    return Settled(
        breaker=record(breaker, ok=ok, now_ms=now_ms),
        state=merged_state(state_before, state_after, now.state),
        enabled=not (switched_off or disable or (fires and one_shot)),
        fires=fires,
    )


def merged_state(
    before: Mapping[str, Any], after: Mapping[str, Any], now: Mapping[str, Any]
) -> dict[str, Any]:
    """`now` with the keys one call set or removed (from `before` to `after`) applied: calls
    running at once each keep their own keys; for one key, the last to finish wins."""
    changed = {
        key: value for key, value in after.items() if key not in before or before[key] != value
    }
    removed = before.keys() - after.keys()
    return {**{k: v for k, v in now.items() if k not in removed}, **changed}
