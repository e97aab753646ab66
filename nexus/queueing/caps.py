"""Queue caps (docs/runtime.md): at most N open items per session; what to drop beyond it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.ledger.enums import DropPolicy
from nexus.ledger.records import QueueItemRecord

__all__ = ["DEFAULT_CAP", "DROP_POLICIES", "DropPolicy", "over_cap"]

DEFAULT_CAP = 20
DROP_POLICIES: tuple[DropPolicy, ...] = ("old", "new", "summarize")


@dataclass(frozen=True)
class CapDecision:
    dropped: tuple[QueueItemRecord, ...]
    # One notice for all dropped items (summarize) or one per dropped item (old, new).
    one_notice: bool


def over_cap(waiting: Sequence[QueueItemRecord], *, cap: int, policy: DropPolicy) -> CapDecision:
    """Which waiting (queued, not claimed) items to drop so at most `cap` remain.

    `old` drops the oldest, `new` the newest arrivals, `summarize` the oldest but tells the
    sender once, with what was dropped summarised (OpenClaw's default: silent drops are
    what users complain about most).
    """
    excess = len(waiting) - cap
    if cap <= 0 or excess <= 0:
        return CapDecision(dropped=(), one_notice=False)
    if policy == "new":
        return CapDecision(dropped=tuple(waiting[-excess:]), one_notice=False)
    return CapDecision(dropped=tuple(waiting[:excess]), one_notice=policy == "summarize")
