"""`nexus configure --title/--tag`, `nexus sessions`, `nexus delete` and `nexus rollback`
through a real server on the embedded ledger."""

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


def _turns(server: Nexus, label: str, *texts: str) -> list[str]:
    database, turns = server.database, server.turns
    with database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        session = uow.ledger.sessions.ensure(NewSession(label=label, persona_id=persona.id))
        uow.commit()
    turn_ids = []
    for text in texts:
        with database.unit_of_work() as uow:
            epoch = uow.ledger.sessions.claim(session.id)
            uow.commit()
        turn_ids.append(turns.run_turn(session.id, [QueryMessage(text)], epoch=epoch).turn_id)
    return turn_ids


def test_title_and_tags_are_set_and_shown(server: Nexus) -> None:
    _turns(server, "dm:ent_cli")
    done = runner.invoke(
        app, ["configure", "dm:ent_cli", "--title", "Invoices", "--tag", "money", "--tag", "acme"]
    )
    assert done.exit_code == 0, done.output
    assert "title: Invoices" in done.stdout and "tags: money, acme" in done.stdout
    listed = runner.invoke(app, ["sessions", "--json"])
    [item] = json.loads(listed.stdout)["items"]
    assert (item["title"], item["tags"]) == ("Invoices", ["money", "acme"])
    shown = runner.invoke(app, ["session", "dm:ent_cli"])
    assert "title: Invoices" in shown.stdout
    cleared = runner.invoke(
        app, ["configure", "dm:ent_cli", "--title", "default", "--tag", "default", "--json"]
    )
    assert (json.loads(cleared.stdout)["title"], json.loads(cleared.stdout)["tags"]) == (None, None)


def test_delete_marks_it_deleted_and_messages_are_refused(server: Nexus) -> None:
    _turns(server, "dm:ent_cli", "hello")
    deleted = runner.invoke(app, ["delete", "dm:ent_cli"])
    assert deleted.exit_code == 0 and "deleted dm:ent_cli" in deleted.stdout
    shown = runner.invoke(app, ["session", "dm:ent_cli", "--json"])
    assert json.loads(shown.stdout)["status"] == "deleted"
    refused = runner.invoke(app, ["send", "dm:ent_cli", "anyone?"])
    assert refused.exit_code == 1 and "was deleted" in refused.output


def test_rollback_moves_the_head_and_the_tree_keeps_the_abandoned_branch(server: Nexus) -> None:
    turns = _turns(server, "dm:ent_cli", "one", "two", "three")
    done = runner.invoke(app, ["rollback", "dm:ent_cli", turns[0]])
    assert done.exit_code == 0, done.output
    assert f"head {turns[2]} → {turns[0]}" in done.stdout
    tree = runner.invoke(app, ["tree", "dm:ent_cli"])
    assert f"abandoned: head was {turns[2]}" in tree.stdout
    refused = runner.invoke(app, ["rollback", "dm:ent_cli", turns[2]])
    assert refused.exit_code == 1 and "abandoned branch" in refused.output
