"""`nexus turn`, `nexus fork` and `nexus queue` on the embedded ledger (`nexus compact` goes
through the API: tests/integration/test_dev_mode.py runs it against `nexus dev`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nexus.bootstrap import bootstrap
from nexus.cli.app import app
from nexus.db import Database
from nexus.engine.query import QueryMessage
from nexus.ledger.records import NewSession
from nexus.settings import Settings, get_settings

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in ("NEXUS_DATABASE_URL", "NEXUS_REDIS_URL", "NEXUS_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def three_turns(tmp_path: Path) -> list[str]:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    database = Database(f"sqlite:///{tmp_path / '.nexus' / 'nexus.db'}")
    engine = bootstrap(Settings(), database=database).engine
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        session = uow.ledger.sessions.ensure(NewSession(label="dm:ent_cli", persona_id=persona.id))
        uow.commit()
    turn_ids = []
    for text in ("the invoice is due Friday", "ACME owes 300", "remind me Thursday"):
        with database.unit_of_work() as uow:
            epoch = uow.ledger.sessions.claim(session.id)
            uow.commit()
        turn_ids.append(engine.run_turn(session.id, [QueryMessage(text)], epoch=epoch).turn_id)
    database.dispose()
    return turn_ids


def test_turn_shows_messages_and_refuses_unknown_ids(three_turns: list[str]) -> None:
    shown = runner.invoke(app, ["turn", three_turns[1], "--json"])
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["messages"][0]["content"]["text"] == "ACME owes 300"
    assert view["turn"]["cost_micros"] == 0  # the scripted model costs nothing
    plain = runner.invoke(app, ["turn", three_turns[1]])
    assert plain.exit_code == 0 and "tokens, $0.000000 (scripted)" in plain.stdout
    assert runner.invoke(app, ["turn", "nope"]).exit_code == 1


def test_fork_branches_from_a_turn(three_turns: list[str]) -> None:
    forked = runner.invoke(app, ["fork", three_turns[0], "--label", "what-if", "--json"])
    assert forked.exit_code == 0, forked.output
    session = json.loads(forked.stdout)
    assert (session["label"], session["thread_id"], session["origin"]) == (
        "what-if",
        three_turns[0],
        "fork",
    )
    refused = runner.invoke(app, ["fork", "not-a-turn"])
    assert refused.exit_code == 1 and "cannot be forked" in refused.output


def test_queue_lists_items_and_cancels_a_waiting_one(tmp_path: Path) -> None:
    from nexus.ledger.enums import QueueMode
    from nexus.ledger.records import NewQueueItem

    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    database = Database(f"sqlite:///{tmp_path / '.nexus' / 'nexus.db'}")
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        session = uow.ledger.sessions.ensure(NewSession(label="dm:ent_q", persona_id=persona.id))
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, payload={"text": "x"})
        )
        uow.commit()
    database.dispose()
    listed = runner.invoke(app, ["queue", "dm:ent_q", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout)[0]["status"] == "queued"
    cancelled = runner.invoke(app, ["queue", "dm:ent_q", "--cancel", item_id, "--json"])
    assert cancelled.exit_code == 0
    assert json.loads(cancelled.stdout)[0]["disposition"] == "cancelled"
    again = runner.invoke(app, ["queue", "dm:ent_q", "--cancel", item_id])
    assert again.exit_code == 1 and "cannot cancel" in again.output


def test_tree_shows_the_chain_and_its_forks(three_turns: list[str]) -> None:
    assert runner.invoke(app, ["fork", three_turns[0], "--label", "branch"]).exit_code == 0
    shown = runner.invoke(app, ["tree", "dm:ent_cli", "--json"])
    assert shown.exit_code == 0, shown.output
    tree = json.loads(shown.stdout)
    assert [t["id"] for t in tree["turns"]] == three_turns
    assert tree["turns"][0]["branches"][0]["session"] == "branch"
    text = runner.invoke(app, ["tree", "dm:ent_cli"])
    assert "fork branch" in text.output
    assert runner.invoke(app, ["tree", "dm:nobody"]).exit_code == 1


def test_tree_shows_a_compaction_with_its_summary_first_line(
    three_turns: list[str], tmp_path: Path
) -> None:
    database = Database(f"sqlite:///{tmp_path / '.nexus' / 'nexus.db'}")
    engine = bootstrap(Settings(), database=database).engine  # the offline model
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve("dm:ent_cli")
        assert session is not None
        epoch = uow.ledger.sessions.claim(session.id)
        uow.commit()
    compaction = engine.compact(session.id, epoch=epoch)
    database.dispose()
    assert compaction.status == "committed" and compaction.summary
    headline = compaction.summary.splitlines()[0]
    assert "the invoice is due Friday" in headline
    found = json.loads(runner.invoke(app, ["tree", "dm:ent_cli", "--json"]).stdout)
    assert found["turns"][-1]["summary"] == headline
    shown = runner.invoke(app, ["tree", "dm:ent_cli"]).output
    turn_id = compaction.turn_id or ""
    [line] = [line for line in shown.splitlines() if turn_id and turn_id in line]
    assert "compaction" in line and "Summary: the invoice is due Friday" in line
