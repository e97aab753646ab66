"""Model usage and its cost, summed per UTC day and model, for a session, a persona or all.

Every turn counts, on the chain or off it (a failed or superseded attempt was billed too),
compactions included: their summary call's usage is the compaction turn's. Cost is what
each turn was priced at when it committed (`turns.cost_micros`); a turn with tokens and no
cost is unpriced (its model had no price, or it predates migration 0008). A turn's day is
the UTC day its run started (`started_at`), which `ix_turns_started_at` and
`ix_turns_session_id_started_at` serve.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Connection, case, func, select

from nexus.ledger.repository.tables import sessions, turns

DAY_MS = 86_400_000


@dataclass(frozen=True)
class UsageGroup:
    """Turns of one UTC day (days since 1970-01-01) and one model."""

    day: int
    model: str | None
    turns: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_micros: int  # of the priced turns
    priced_turns: int  # turns with tokens and a cost
    unpriced_turns: int  # turns with tokens and no cost


@dataclass
class UsageSum:
    """Groups added up. `cost_micros` is None when none of the usage could be priced;
    otherwise it is the priced part, and `unpriced_turns` says how much is missing."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    priced_micros: int = 0
    priced_turns: int = 0
    unpriced_turns: int = 0
    unpriced_models: set[str] = field(default_factory=set)

    def add(self, group: UsageGroup) -> None:
        self.turns += group.turns
        self.input_tokens += group.input_tokens
        self.output_tokens += group.output_tokens
        self.cache_read_tokens += group.cache_read_tokens
        self.cache_write_tokens += group.cache_write_tokens
        self.priced_micros += group.cost_micros
        self.priced_turns += group.priced_turns
        self.unpriced_turns += group.unpriced_turns
        if group.unpriced_turns:
            self.unpriced_models.add(group.model or "")

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    @property
    def cost_micros(self) -> int | None:
        if self.unpriced_turns and not self.priced_turns:
            return None
        return self.priced_micros


@dataclass(frozen=True)
class UsageReport:
    totals: UsageSum
    days: list[tuple[int, UsageSum]]  # oldest first
    models: list[tuple[str | None, UsageSum]]  # by model name


def summarize(groups: Iterable[UsageGroup]) -> UsageReport:
    """Totals, per day and per model, from the (day, model) groups."""
    totals = UsageSum()
    days: dict[int, UsageSum] = {}
    models: dict[str | None, UsageSum] = {}
    for group in groups:
        totals.add(group)
        days.setdefault(group.day, UsageSum()).add(group)
        models.setdefault(group.model, UsageSum()).add(group)
    return UsageReport(
        totals=totals,
        days=sorted(days.items()),
        models=sorted(models.items(), key=lambda item: item[0] or ""),
    )


def _sum(column: ColumnElement[Any]) -> ColumnElement[Any]:
    return func.coalesce(func.sum(column), 0)


class UsageRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def groups(
        self,
        *,
        session_id: str | None = None,
        persona_id: str | None = None,
        since_ms: int | None = None,
    ) -> list[UsageGroup]:
        """Usage per UTC day and model of the turns that match every filter given."""
        day = (turns.c.started_at // DAY_MS).label("day")
        # A turn without tokens (a lost run's record) is neither priced nor unpriced.
        used = turns.c.total_tokens > 0
        priced = case((turns.c.cost_micros.is_not(None) & used, 1), else_=0)
        unpriced = case((turns.c.cost_micros.is_(None) & used, 1), else_=0)
        query = select(
            day,
            turns.c.model,
            func.count(),
            _sum(turns.c.prompt_tokens),
            _sum(turns.c.completion_tokens),
            _sum(turns.c.cache_read_tokens),
            _sum(turns.c.cache_write_tokens),
            _sum(turns.c.cost_micros),
            _sum(priced),
            _sum(unpriced),
        )
        if session_id is not None:
            query = query.where(turns.c.session_id == session_id)
        if persona_id is not None:
            query = query.join(sessions, sessions.c.id == turns.c.session_id).where(
                sessions.c.persona_id == persona_id
            )
        if since_ms is not None:
            query = query.where(turns.c.started_at >= since_ms)
        query = query.group_by(day, turns.c.model)
        return [
            UsageGroup(int(d), model, *(int(value) for value in rest))
            for d, model, *rest in self._conn.execute(query).all()
        ]
