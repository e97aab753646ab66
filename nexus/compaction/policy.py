"""When to compact and what to keep (docs/engine.md, "Compaction"): pure decisions over
per-turn costs; no I/O.

The unit is the whole turn. A turn holds its tool calls together with their results, so
cutting between turns can never separate a tool_use from its tool_result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PROACTIVE_THRESHOLD = 0.85  # compact before a turn once the context reaches this share
PROACTIVE_TARGET = 0.60  # ... down to this share
OVERFLOW_TARGET = 0.40  # after the model refused an over-long context: compact harder
COMMAND = "/compact"


@dataclass(frozen=True)
class TurnCost:
    turn_id: str
    tokens: int


@dataclass(frozen=True)
class CompactionPlan:
    summarized: tuple[str, ...]
    kept: tuple[str, ...]
    summarized_through_turn_id: str
    first_kept_turn_id: str | None
    tokens_before: int
    tokens_kept: int


@dataclass(frozen=True)
class ManualCompaction:
    instructions: str | None


def should_compact(context_tokens: int, window: int) -> bool:
    return context_tokens >= PROACTIVE_THRESHOLD * window


def plan_compaction(
    turns: Sequence[TurnCost],
    *,
    window: int,
    target_ratio: float,
    fixed_tokens: int,
    summary_reserve: int,
) -> CompactionPlan | None:
    """Keep the newest turns that fit the target budget; summarise all older ones.

    None when nothing would be summarised (every turn fits, or there are none).
    """
    budget = window * target_ratio - fixed_tokens - summary_reserve
    kept_count = 0
    kept_tokens = 0
    for turn in reversed(turns):
        if kept_tokens + turn.tokens > budget:
            break
        kept_count += 1
        kept_tokens += turn.tokens
    split = len(turns) - kept_count
    if split == 0:
        return None
    summarized, kept = turns[:split], turns[split:]
    return CompactionPlan(
        summarized=tuple(t.turn_id for t in summarized),
        kept=tuple(t.turn_id for t in kept),
        summarized_through_turn_id=summarized[-1].turn_id,
        first_kept_turn_id=kept[0].turn_id if kept else None,
        tokens_before=sum(t.tokens for t in turns),
        tokens_kept=kept_tokens,
    )


def manual_compaction_request(text: str) -> ManualCompaction | None:
    """`/compact` or `/compact <instructions>` as a whole message; anything else is None."""
    stripped = text.strip()
    if stripped == COMMAND:
        return ManualCompaction(instructions=None)
    if stripped.startswith(COMMAND) and stripped[len(COMMAND)].isspace():
        return ManualCompaction(instructions=stripped[len(COMMAND) :].strip() or None)
    return None
