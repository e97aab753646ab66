"""What a compaction commits, built without I/O: its size (what to cut) and its draft."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nexus.compaction import policy
from nexus.compaction.policy import CompactionPlan
from nexus.compaction.summarize import Summary
from nexus.engine import budget
from nexus.engine.context import AssembledContext, turn_pieces
from nexus.ledger.enums import CompactionTrigger, MessageRole, TurnType
from nexus.ledger.records import (
    CompactionDraft,
    ConsumedItem,
    ContextRead,
    MessageDraft,
    TurnDraft,
)
from nexus.pricing import PriceTable

SUMMARY_RESERVE_RATIO = 0.05  # of the window, kept free for the summary itself


@dataclass(frozen=True)
class CompactionSizing:
    """What a compaction cuts: its plan, against which window, beside which fixed prompt."""

    plan: CompactionPlan
    window: int
    fixed_tokens: int


def size_compaction(
    context: ContextRead,
    assembled: AssembledContext,
    *,
    trigger: CompactionTrigger,
    target_ratio: float,
) -> CompactionSizing | None:
    """The turns to summarise and to keep, or None when nothing needs summarising."""
    window = assembled.window
    fixed = budget.estimate_text_tokens(assembled.request.system_text)
    costs = [
        policy.TurnCost(
            turn_id=view.turn.id,
            tokens=sum(budget.estimate_block_tokens(b) for _, b in turn_pieces(view)),
        )
        for view in context.turns
    ]
    if trigger == CompactionTrigger.OVERFLOW:
        # The model measured the context as too long where our estimate did not: size the
        # cut against what we estimated, so it shrinks whatever the estimate's error.
        window = min(window, fixed + sum(cost.tokens for cost in costs))
    plan = policy.plan_compaction(
        costs,
        window=window,
        target_ratio=target_ratio,
        fixed_tokens=fixed,
        summary_reserve=int(window * SUMMARY_RESERVE_RATIO),
    )
    if plan is None and trigger != CompactionTrigger.PROACTIVE:
        # Asked for by name, or forced by the model: everything goes into the summary.
        plan = policy.plan_compaction(
            costs, window=window, target_ratio=0.0, fixed_tokens=0, summary_reserve=0
        )
    return None if plan is None else CompactionSizing(plan, window, fixed)


def compaction_draft(
    *,
    turn_id: str,
    session_id: str,
    head_turn_id: str,
    sizing: CompactionSizing,
    summary: Summary,
    model_name: str,
    provider: str | None,
    trigger: CompactionTrigger,
    started: int,
    completed: int,
    instructions: str | None,
    consumed: Sequence[ConsumedItem],
    metadata: Mapping[str, Any] | None,
    prices: PriceTable,
) -> TurnDraft:
    """The compaction turn: the summary as its one system message, and its record."""
    plan, fixed = sizing.plan, sizing.fixed_tokens
    model = summary.model or model_name
    summary_tokens = budget.estimate_text_tokens(summary.text)
    cost = prices.cost(model, summary.usage)
    return TurnDraft(
        id=turn_id,
        session_id=session_id,
        parent_turn_id=head_turn_id,
        turn_type=TurnType.COMPACTION,
        started_at=started,
        completed_at=completed,
        usage=summary.usage,
        cost_micros=cost.micros,
        price_version=cost.price_version,
        context_tokens=plan.tokens_kept + summary_tokens + fixed,
        model=model,
        stop_reason="compaction",
        messages=(MessageDraft(role=MessageRole.SYSTEM, content={"text": summary.text}),),
        consumed=tuple(consumed),
        compaction=CompactionDraft(
            summary=summary.text,
            summarized_through_turn_id=plan.summarized_through_turn_id,
            first_kept_turn_id=plan.first_kept_turn_id,
            turns_summarized=len(plan.summarized),
            trigger=trigger,
            model=model,
            provider=provider,
            tokens_before=plan.tokens_before + fixed,
            tokens_after=plan.tokens_kept + summary_tokens + fixed,
            summary_tokens=summary_tokens,
            summarization_input_tokens=summary.usage.input_tokens,
            summarization_output_tokens=summary.usage.output_tokens,
            duration_ms=completed - started,
            instructions=instructions,
            metadata={
                "fallback": summary.fallback,
                "error": summary.error,
                "kept_turns": len(plan.kept),
                "window": sizing.window,
                **(metadata or {}),
            },
        ),
    )
