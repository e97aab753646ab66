"""What a turn commits, built without I/O: its draft, or a refused one's result."""

from __future__ import annotations

from collections.abc import Sequence

from nexus.engine.model import ModelError
from nexus.engine.model_config import EffectiveConfig
from nexus.engine.query import QueryMessage
from nexus.engine.turn import TurnResult, query_draft
from nexus.ledger.enums import Disposition, QueueMode, TurnStatus
from nexus.ledger.records import ConsumedItem, TokenUsage, TurnDraft
from nexus.pricing import PriceTable


def answer_draft(
    *,
    turn_id: str,
    session_id: str,
    parent_turn_id: str | None,
    result: TurnResult,
    started: int,
    completed: int,
    consumed: Sequence[ConsumedItem],
    queue_mode: QueueMode | None,
    queries: Sequence[QueryMessage],
    config: EffectiveConfig | None,
    prices: PriceTable,
) -> TurnDraft:
    """The turn a model run produced, priced, with the inputs it consumed (none if it
    failed: they stay queued) and the queries it injected mid-run."""
    injected = tuple(
        ConsumedItem(queue_item_id=q.queue_item_id, disposition=Disposition.INJECTED)
        for q in result.injected
        if q.queue_item_id is not None
    )
    model = config.model if config is not None else None
    cost = prices.cost(model, result.usage)
    return TurnDraft(
        id=turn_id,
        session_id=session_id,
        parent_turn_id=parent_turn_id,
        status=result.status,
        queue_mode=queue_mode,
        started_at=started,
        completed_at=completed,
        usage=result.usage,
        cost_micros=cost.micros,
        price_version=cost.price_version,
        context_tokens=result.context_tokens,
        model=model,
        model_settings=config.stored() if config is not None else None,
        stop_reason=result.stop_reason,
        error_kind=result.error.kind if result.error is not None else None,
        error_message=result.error.message if result.error is not None else None,
        source_event_id=next((q.event_id for q in queries if q.event_id), None),
        messages=result.messages,
        tool_calls=result.tool_calls,
        consumed=() if result.status == TurnStatus.FAILED else (*consumed, *injected),
    )


def refused_result(queries: Sequence[QueryMessage], reason: str) -> TurnResult:
    """A turn that never called the model because its configuration cannot be sent."""
    error = ModelError("model_error", f"model configuration: {reason}")
    return TurnResult(
        status=TurnStatus.FAILED,
        messages=tuple(query_draft(query) for query in queries),
        tool_calls=(),
        usage=TokenUsage(),
        context_tokens=None,
        stop_reason=error.kind,
        error=error,
        injected=(),
        model_calls=0,
    )
