"""`nexus usage [--session S] [--persona P] [--since DATE] [--json]` against a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nexus.cli.app import app
from nexus.db import Database
from nexus.ledger.records import TokenUsage
from nexus.pricing import BUILTIN
from tests.support import new_session, serving_cli, text_turn

runner = CliRunner()
JAN_1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY = 86_400_000
SONNET = "claude-sonnet-4-5"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    with serving_cli(tmp_path, monkeypatch) as graph:
        yield graph.database


def _spend(database: Database) -> None:
    """`dm:a` (atlas): Sonnet on Jan 1 and 2; `dm:b` (bolt): a model with no price, Jan 2."""
    with database.unit_of_work() as uow:
        for label, persona, turns in (
            ("dm:a", "atlas", [(SONNET, 1_000, 100, JAN_1), (SONNET, 0, 10, JAN_1 + DAY)]),
            ("dm:b", "bolt", [("local-llm", 40, 4, JAN_1 + DAY)]),
        ):  # fmt: skip
            session = new_session(uow.ledger, label, persona)
            epoch = uow.ledger.sessions.claim(session.id)
            head = None
            for model, given, taken, at in turns:
                usage = TokenUsage(input_tokens=given, output_tokens=taken)
                cost = BUILTIN.cost(model, usage)
                draft = text_turn(session, head, "q").model_copy(
                    update={"model": model, "usage": usage, "started_at": at,
                            "cost_micros": cost.micros, "price_version": cost.price_version}
                )  # fmt: skip
                assert uow.ledger.turns.commit(draft, epoch=epoch).committed
                head = draft.id
        uow.commit()


def _run(*args: str) -> str:
    result = runner.invoke(app, ["usage", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_usage_shows_days_models_and_totals_and_says_what_is_unpriced(server: Database) -> None:
    _spend(server)
    shown = _run()
    lines = [" ".join(line.replace("│", " ").split()) for line in shown.splitlines()]
    assert "2026-01-01 1 1,000 100 0 0 0.004500" in lines
    assert "2026-01-02 2 40 14 0 0 0.000150 1" in lines  # the cost leaves 1 turn out
    assert "local-llm 1 40 4 0 0 — 1" in lines  # no price: no cost, never 0
    assert "total 3 1,040 114 0 0 0.004650 1" in lines
    assert "1 turn(s) unpriced (models with no price: local-llm;" in " ".join(shown.split())

    atlas = json.loads(_run("--persona", "atlas", "--json"))
    assert atlas["totals"]["cost_usd"] == "0.004650" and atlas["totals"]["unpriced_turns"] == 0
    assert [day["day"] for day in atlas["days"]] == ["2026-01-01", "2026-01-02"]
    later = json.loads(_run("--session", "dm:a", "--since", "2026-01-02", "--json"))
    assert later["totals"]["cost_micros"] == 150 and later["since"].startswith("2026-01-02")
    assert "no model usage since 2027-01-01" in _run("--since", "2027-01-01")


def test_usage_says_what_is_wrong_with_a_filter(server: Database) -> None:
    for args, says in (
        (["--since", "yesterday"], "since (query): must be a date (YYYY-MM-DD)"),
        (["--persona", "nobody"], "no persona named 'nobody'"),
    ):
        result = runner.invoke(app, ["usage", *args])
        assert result.exit_code == 1 and says in " ".join(result.output.split()), result.output
