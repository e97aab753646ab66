"""A session's effective queue settings and where each came from (pure): the session's own,
then its access policy's, then the deployment's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from nexus.ledger.enums import DropPolicy, QueueMode

T = TypeVar("T")
Source = Literal["session", "policy", "default"]
# Items that carry their own collect window (set where a session or policy chose one).
DEBOUNCE_KEY = "debounce_ms"


@dataclass(frozen=True)
class QueueOverrides:
    """What one layer sets; None leaves the choice to the next layer."""

    mode: QueueMode | None = None
    cap: int | None = None
    drop: DropPolicy | None = None
    debounce_ms: int | None = None


@dataclass(frozen=True)
class QueueDefaults:
    cap: int
    drop: DropPolicy
    debounce_ms: int


@dataclass(frozen=True)
class Setting(Generic[T]):
    value: T
    source: Source


@dataclass(frozen=True)
class EffectiveQueue:
    # None: no layer chose a mode, so each message's source does (docs/runtime.md, "Queue
    # modes": interrupt for a person, followup for automation).
    mode: Setting[QueueMode | None]
    cap: Setting[int]
    drop: Setting[DropPolicy]
    debounce_ms: Setting[int]


def _first(session: T | None, policy: T | None, default: T) -> Setting[T]:
    if session is not None:
        return Setting(session, "session")
    if policy is not None:
        return Setting(policy, "policy")
    return Setting(default, "default")


def effective_queue(
    session: QueueOverrides, policy: QueueOverrides, defaults: QueueDefaults
) -> EffectiveQueue:
    """Each setting from the first layer that sets it."""
    mode: Setting[QueueMode | None] = _first(session.mode, policy.mode, None)
    return EffectiveQueue(
        mode=mode,
        cap=_first(session.cap, policy.cap, defaults.cap),
        drop=_first(session.drop, policy.drop, defaults.drop),
        debounce_ms=_first(session.debounce_ms, policy.debounce_ms, defaults.debounce_ms),
    )


def item_payload(effective: EffectiveQueue) -> dict[str, int]:
    """What a queued item records of the settings it arrived under: a collect window a
    session or policy chose (the runner reads it from the item, not the session)."""
    if effective.debounce_ms.source == "default":
        return {}
    return {DEBOUNCE_KEY: effective.debounce_ms.value}
