"""`nexus turn`, `nexus fork`, `nexus queue` and `nexus tree` through a real server on the
embedded ledger (`nexus compact`: tests/integration/test_dev_mode.py runs it against
`nexus dev`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nexus.bootstrap import Nexus
from nexus.cli.app import app
from nexus.engine.query import QueryMessage
from nexus.ledger.records import NewSession
from nexus.settings import get_settings
from tests.support import serving_cli

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
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Nexus]:
    with serving_cli(tmp_path, monkeypatch) as graph:
        yield graph


@pytest.fixture
def three_turns(server: Nexus) -> list[str]:
    database, turns = server.database, server.turns
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        session = uow.ledger.sessions.ensure(NewSession(label="dm:ent_cli", persona_id=persona.id))
        uow.commit()
    turn_ids = []
    for text in ("the invoice is due Friday", "ACME owes 300", "remind me Thursday"):
        with database.unit_of_work() as uow:
            epoch = uow.ledger.sessions.claim(session.id)
            uow.commit()
        turn_ids.append(turns.run_turn(session.id, [QueryMessage(text)], epoch=epoch).turn_id)
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
    assert refused.exit_code == 1 and "no turn 'not-a-turn'" in refused.output


def test_queue_lists_items_and_cancels_a_waiting_one_through_the_api(server: Nexus) -> None:
    from nexus.ledger.enums import QueueMode
    from nexus.ledger.records import NewQueueItem

    with server.database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        session = uow.ledger.sessions.ensure(NewSession(label="dm:ent_q", persona_id=persona.id))
        other = uow.ledger.sessions.ensure(NewSession(label="dm:other", persona_id=persona.id))
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, payload={"text": "x"})
        )
        elsewhere, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=other.id, mode=QueueMode.QUEUE, payload={"text": "y"})
        )
        uow.commit()
    after = server.coordination.stream_tail(session.id)
    listed = runner.invoke(app, ["queue", "dm:ent_q", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout)[0]["status"] == "queued"
    # Another session's item is not this session's to cancel: 404, and it stays queued.
    foreign = runner.invoke(app, ["queue", "dm:ent_q", "--cancel", elsewhere])
    assert foreign.exit_code == 1 and "404" in foreign.output
    assert (
        json.loads(runner.invoke(app, ["queue", "dm:other", "--json"]).stdout)[0]["status"]
        == "queued"
    )
    cancelled = runner.invoke(app, ["queue", "dm:ent_q", "--cancel", item_id, "--json"])
    assert cancelled.exit_code == 0
    assert json.loads(cancelled.stdout)[0]["disposition"] == "cancelled"
    # The cancel is announced on the session's stream, as the API's cancel always was.
    announced = server.coordination.read_stream(session.id, after, block_ms=0)
    assert [(e.type, e.data["queue_item_id"]) for e in announced] == [
        ("queue.item.dropped", item_id)
    ]
    again = runner.invoke(app, ["queue", "dm:ent_q", "--cancel", item_id])
    assert again.exit_code == 1 and "409" in again.output and "not waiting" in again.output


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
    three_turns: list[str], server: Nexus
) -> None:
    database, turns = server.database, server.turns  # the offline model
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve("dm:ent_cli")
        assert session is not None
        epoch = uow.ledger.sessions.claim(session.id)
        uow.commit()
    compaction = turns.compaction().compact(session.id, epoch=epoch)
    assert compaction.status == "committed" and compaction.summary
    headline = compaction.summary.splitlines()[0]
    assert "the invoice is due Friday" in headline
    found = json.loads(runner.invoke(app, ["tree", "dm:ent_cli", "--json"]).stdout)
    assert found["turns"][-1]["summary"] == headline
    shown = runner.invoke(app, ["tree", "dm:ent_cli"]).output
    turn_id = compaction.turn_id or ""
    [line] = [line for line in shown.splitlines() if turn_id and turn_id in line]
    assert "compaction" in line and "Summary: the invoice is due Friday" in line
