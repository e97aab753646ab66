"""Usage and cost per session, persona and UTC day, and the counts /metrics keeps of them,
on both databases: every turn counts (failed attempts and compactions too), an unknown
model is unpriced, never free."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import bindparam, text

from nexus.db import Database
from nexus.db.migrate import alembic_config, upgrade
from nexus.ledger.enums import TurnStatus
from nexus.ledger.records import SessionRecord, TokenUsage, TurnDraft
from nexus.ledger.repository import Ledger
from nexus.ledger.repository.usage import UsageSum, summarize
from nexus.pricing import BUILTIN
from tests.services import create_database, drop_database
from tests.support import FakeClock, build_chain, compaction_turn, new_session, text_turn

DAY = 86_400_000
JAN_1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
JAN_1_DAY = JAN_1 // DAY
SONNET, HAIKU = "claude-sonnet-4-5", "claude-haiku-4-5"


def _usage(i: int = 0, o: int = 0, r: int = 0, w: int = 0) -> TokenUsage:
    return TokenUsage(input_tokens=i, output_tokens=o, cache_read_tokens=r, cache_write_tokens=w)


def _priced(draft: TurnDraft, model: str, usage: TokenUsage, at: int) -> TurnDraft:
    cost = BUILTIN.cost(model, usage)
    return draft.model_copy(
        update={
            "model": model,
            "usage": usage,
            "started_at": at,
            "completed_at": at + 1_000,
            "cost_micros": cost.micros,
            "price_version": cost.price_version,
        }
    )


class Chain:
    """Turns committed one after another onto a session's head."""

    def __init__(self, ledger: Ledger, session: SessionRecord) -> None:
        self.ledger, self.session = ledger, session
        self.epoch = ledger.sessions.claim(session.id)
        self.head: str | None = None

    def turn(self, model: str, usage: TokenUsage, at: int) -> str:
        draft = _priced(text_turn(self.session, self.head, "q"), model, usage, at)
        assert self.ledger.turns.commit(draft, epoch=self.epoch).committed
        self.head = draft.id
        return draft.id

    def failed(self, model: str, usage: TokenUsage, at: int) -> None:
        draft = text_turn(self.session, self.head, "q", status=TurnStatus.FAILED)
        self.ledger.turns.record_attempt(_priced(draft, model, usage, at), epoch=self.epoch)

    def compaction(self, model: str, usage: TokenUsage, at: int) -> None:
        assert self.head is not None
        draft = compaction_turn(
            self.session, self.head, "summary", first_kept=None, summarized_through=self.head,
            turns_summarized=1,
        )  # fmt: skip
        assert self.ledger.turns.commit(
            _priced(draft, model, usage, at), epoch=self.epoch
        ).committed
        self.head = draft.id


def _ledger(database: Database) -> tuple[SessionRecord, SessionRecord, SessionRecord]:
    """Atlas talks in `dm:a` (Sonnet, two days) and `dm:b` (Haiku and an unknown model);
    Bolt in `dm:c`."""
    with database.unit_of_work() as uow:
        a = new_session(uow.ledger, "dm:a", "atlas")
        b = new_session(uow.ledger, "dm:b", "atlas")
        c = new_session(uow.ledger, "dm:c", "bolt")
        chain = Chain(uow.ledger, a)
        chain.turn(SONNET, _usage(i=1_000, o=200, r=5_000, w=2_000), JAN_1 + 5)  # 15,000 µ$
        chain.failed(SONNET, _usage(i=100, o=10), JAN_1 + 60_000)  # 450 µ$: billed, off-chain
        chain.turn(SONNET, _usage(i=2_000, o=100), JAN_1 + DAY - 1)  # 7,500 µ$, still Jan 1
        chain.compaction(SONNET, _usage(i=3_000, o=300), JAN_1 + DAY)  # 13,500 µ$, Jan 2
        chain = Chain(uow.ledger, b)
        chain.turn(HAIKU, _usage(i=1, r=14), JAN_1 + DAY + 7)  # 2.4 → 2 µ$
        chain.turn("mystery-model", _usage(i=500, o=50), JAN_1 + 2 * DAY)  # unpriced
        chain.failed("mystery-model", _usage(), JAN_1 + 2 * DAY)  # no tokens: free, not unpriced
        Chain(uow.ledger, c).turn(SONNET, _usage(i=10), JAN_1 + 2 * DAY)  # 30 µ$
        uow.commit()
    return a, b, c


def _tokens(total: UsageSum) -> tuple[int, int, int, int]:
    return (
        total.input_tokens,
        total.output_tokens,
        total.cache_read_tokens,
        total.cache_write_tokens,
    )


def test_totals_per_day_session_and_persona(database: Database) -> None:
    a, _, _ = _ledger(database)
    with database.reading() as uow:
        everything = summarize(uow.ledger.usage.groups())
        only_a = summarize(uow.ledger.usage.groups(session_id=a.id))
        atlas = summarize(uow.ledger.usage.groups(persona_id=a.persona_id))
        since = summarize(uow.ledger.usage.groups(since_ms=JAN_1 + DAY))
        nothing = summarize(uow.ledger.usage.groups(session_id="no-such-session"))

    assert _tokens(only_a.totals) == (6_100, 610, 5_000, 2_000)
    assert only_a.totals.turns == 4 and only_a.totals.cost_micros == 15_000 + 450 + 7_500 + 13_500
    assert [(day - JAN_1_DAY, s.cost_micros, s.turns) for day, s in only_a.days] == [
        (0, 22_950, 3),
        (1, 13_500, 1),
    ]

    total = everything.totals
    assert total.turns == 8 and total.cost_micros == 36_450 + 2 + 30
    assert total.unpriced_turns == 1 and total.unpriced_models == {"mystery-model"}
    by_model = {model: s for model, s in everything.models}
    assert by_model["mystery-model"].cost_micros is None  # unpriced, not 0
    assert by_model["mystery-model"].input_tokens == 500
    assert by_model[HAIKU].cost_micros == 2
    day_3 = dict(everything.days)[JAN_1_DAY + 2]
    assert (day_3.turns, day_3.cost_micros, day_3.unpriced_turns) == (3, 30, 1)

    assert atlas.totals.turns == 7 and atlas.totals.cost_micros == 36_452
    assert [day - JAN_1_DAY for day, _ in since.days] == [1, 2]
    assert since.totals.cost_micros == 13_500 + 2 + 30
    assert nothing.totals.turns == 0 and nothing.totals.cost_micros == 0 and not nothing.days


def test_usage_of_an_unpriced_model_alone_has_no_cost(database: Database) -> None:
    _, b, _ = _ledger(database)
    with database.reading() as uow:
        report = summarize(uow.ledger.usage.groups(session_id=b.id, since_ms=JAN_1 + 2 * DAY))
    assert report.totals.unpriced_turns == 1 and report.totals.cost_micros is None


Figures = tuple[
    list[tuple[str, str, str, int]], list[tuple[str, str, int]], list[tuple[str, str, int]]
]


def _figures_of_the_ledger(database: Database) -> Figures:
    """Tokens, cost and unpriced turns by model and persona, by GROUP BY over the ledger."""
    source = (
        "FROM turns t JOIN sessions s ON s.id = t.session_id JOIN agents a ON a.id = s.persona_id"
    )
    with database.engine.connect() as connection:
        tokens = [
            (str(model), str(persona), kind, int(n))
            for column, kind in (
                ("prompt_tokens", "input"),
                ("completion_tokens", "output"),
                ("cache_read_tokens", "cache_read"),
                ("cache_write_tokens", "cache_write"),
            )
            for model, persona, n in connection.execute(
                text(
                    f"SELECT COALESCE(t.model, ''), a.name, SUM(t.{column}) {source} "
                    f"WHERE t.{column} > 0 GROUP BY 1, 2"
                )
            )
        ]
        cost = connection.execute(
            text(
                f"SELECT COALESCE(t.model, ''), a.name, SUM(t.cost_micros) {source} "
                "WHERE t.cost_micros > 0 GROUP BY 1, 2"
            )
        ).all()
        unpriced = connection.execute(
            text(
                f"SELECT COALESCE(t.model, ''), a.name, COUNT(*) {source} "
                "WHERE t.cost_micros IS NULL AND t.total_tokens > 0 GROUP BY 1, 2"
            )
        ).all()
    return (
        sorted(tokens),
        sorted((str(m), str(p), int(n)) for m, p, n in cost),
        sorted((str(m), str(p), int(n)) for m, p, n in unpriced),
    )


def _scraped(database: Database) -> Figures:
    with database.unit_of_work() as uow:
        figures = uow.ledger.metrics.figures()
        uow.commit()
    return (
        [row for row in figures.tokens if row[-1]],
        [row for row in figures.cost_micros if row[-1]],
        [row for row in figures.unpriced_turns if row[-1]],
    )


def test_metrics_count_tokens_and_cost_by_model_and_persona(database: Database) -> None:
    _ledger(database)
    tokens, cost, unpriced = _scraped(database)
    assert (tokens, cost, unpriced) == _figures_of_the_ledger(database)
    assert (SONNET, "atlas", 36_450) in cost and (SONNET, "bolt", 30) in cost
    assert (SONNET, "atlas", "cache_write", 2_000) in tokens
    assert unpriced == [("mystery-model", "atlas", 1)]
    # Nothing new: the same figures, and no delta left behind.
    assert _scraped(database) == (tokens, cost, unpriced)
    with database.engine.connect() as connection:
        assert connection.execute(text("SELECT COUNT(*) FROM metric_deltas")).scalar() == 0


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own, to migrate down and up again."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'nexus.db'}"
        return
    url = create_database("nexus_usage")
    try:
        yield url
    finally:
        drop_database(url)


def test_a_ledger_that_predates_costs_is_priced_by_the_migration_as_the_code_prices(
    fresh_url: str,
) -> None:
    url = fresh_url
    upgrade(url)
    database = Database(url, clock=FakeClock())
    spent = {
        SONNET: _usage(i=100, o=10, r=1_000, w=300),
        HAIKU: _usage(i=1, r=15),  # 2.5 micro-dollars: rounds half-up to 3
        "claude-opus-4-1-20250805": _usage(i=7, o=3),
        "claude-3-haiku-20240307": _usage(i=3, o=1, r=7, w=5),
        "mystery-model": _usage(i=9),
    }
    try:
        with database.unit_of_work() as uow:
            session = new_session(uow.ledger)
            chain = Chain(uow.ledger, session)
            priced = {chain.turn(model, usage, JAN_1): model for model, usage in spent.items()}
            build_chain(uow.ledger, session, 3)  # scripted, 10 input tokens each
            uow.commit()
        database.close()
        command.downgrade(alembic_config(url), "0007")  # costs gone: a ledger from before
        upgrade(url)
        with database.engine.connect() as connection:
            found: dict[str, int | None] = dict(
                connection.execute(
                    text("SELECT id, cost_micros FROM turns WHERE id IN :ids").bindparams(
                        bindparam("ids", expanding=True)
                    ),
                    {"ids": list(priced)},
                ).all()
            )
        # The prices as they stood (the migration's frozen copy; the code's may move on).
        assert {priced[turn]: cost for turn, cost in found.items()} == {
            SONNET: 300 + 150 + 300 + 1_125,
            HAIKU: 3,
            "claude-opus-4-1-20250805": 105 + 225,
            "claude-3-haiku-20240307": 4,  # 0.75 + 1.25 + 0.175 + 1.5625 = 3.7375
            "mystery-model": None,
        }
        tokens, cost, unpriced = _scraped(database)
        assert (tokens, cost, unpriced) == _figures_of_the_ledger(database)
        assert unpriced == [("mystery-model", "atlas", 1)]
        with database.reading() as uow:
            report = summarize(uow.ledger.usage.groups())
        assert report.totals.unpriced_models == {"mystery-model"}
        assert report.totals.cost_micros == 1_875 + 3 + 330 + 4
    finally:
        database.close()
