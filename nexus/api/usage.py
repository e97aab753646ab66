"""/v1/usage: tokens and cost, in total, per UTC day and per model, of a session, a persona
or everything since a date."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Literal

from fastapi import Query
from pydantic import BaseModel

from nexus.api.deps import DatabaseDep, v1_router
from nexus.api.errors import ApiError
from nexus.api.validation import PATTERN_WORDS
from nexus.ledger.records import SessionLabel
from nexus.ledger.repository.usage import UsageSum as Sum
from nexus.ledger.strings import PersonaName
from nexus.pricing import usd
from nexus.sessions import service as sessions

router = v1_router("/v1/usage", "usage", 404)
EPOCH = date(1970, 1, 1)
# A date, or a date and time (seconds and fraction optional) with an optional UTC offset:
# what `parse_since` reads. A value of this shape can still name no day (2024-02-30): 422.
SINCE_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}"
    r"([T ]\d{2}(:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$"
)
PATTERN_WORDS[SINCE_PATTERN] = "a date (YYYY-MM-DD) or an ISO 8601 time"
Since = Annotated[
    str,
    Query(
        pattern=SINCE_PATTERN,
        description="A UTC day (YYYY-MM-DD) or an ISO 8601 time (UTC unless it says otherwise)",
    ),
]


class Tokens(BaseModel):
    input: int
    output: int
    cache_read: int
    cache_write: int
    total: int


class Usage(BaseModel):
    """`cost_usd` is exact (a decimal string) and null when none of the usage has a price;
    otherwise it is the priced part and `unpriced_turns` and `unpriced_models` say what it
    leaves out (a model the price table does not know, or a turn from before costs)."""

    turns: int
    tokens: Tokens
    cost_micros: int | None
    cost_usd: str | None
    unpriced_turns: int
    unpriced_models: list[str]

    @classmethod
    def of(cls, total: Sum) -> Usage:
        cost = total.cost_micros
        return cls(
            turns=total.turns,
            tokens=Tokens(
                input=total.input_tokens,
                output=total.output_tokens,
                cache_read=total.cache_read_tokens,
                cache_write=total.cache_write_tokens,
                total=total.total_tokens,
            ),
            cost_micros=cost,
            cost_usd=None if cost is None else usd(cost),
            unpriced_turns=total.unpriced_turns,
            unpriced_models=sorted(total.unpriced_models),
        )


class DayUsage(Usage):
    day: str  # YYYY-MM-DD, the UTC day the turns started


class ModelUsage(Usage):
    model: str | None


class UsageReport(BaseModel):
    session: str | None
    persona: str | None
    since: str | None  # the UTC instant counted from, ISO 8601
    currency: Literal["USD"] = "USD"
    totals: Usage
    days: list[DayUsage]  # oldest first, days with turns only
    models: list[ModelUsage]


def parse_since(value: str) -> datetime:
    """A date (its UTC midnight) or an ISO 8601 time (UTC unless it says otherwise)."""
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC)
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(
            422,
            "invalid_request",
            f"since={value!r} is not a date (YYYY-MM-DD) or an ISO 8601 time",
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@router.get("")
def usage(
    database: DatabaseDep,
    session: SessionLabel | None = None,
    persona: PersonaName | None = None,
    since: Since | None = None,
) -> UsageReport:
    """Tokens (input, output, cache read and write) and cost of every turn that matches
    the filters — a session (aliases followed), a persona (by name), since a date — in
    total, per UTC day and per model. Failed attempts and compactions count: they were
    billed."""
    start = parse_since(since) if since is not None else None
    with database.reading() as uow:
        report = sessions.usage_report(
            uow,
            session=session,
            persona=persona,
            since_ms=int(start.timestamp() * 1000) if start is not None else None,
        )
    return UsageReport(
        session=session,
        persona=persona,
        since=start.isoformat() if start is not None else None,
        totals=Usage.of(report.totals),
        days=[
            DayUsage(day=(EPOCH + timedelta(days=day)).isoformat(), **Usage.of(s).model_dump())
            for day, s in report.days
        ],
        models=[ModelUsage(model=m, **Usage.of(s).model_dump()) for m, s in report.models],
    )
