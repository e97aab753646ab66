"""`nexus entities/entity/aliases/alias/configure/archive` against a real server (SQLite)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nexus.bootstrap import Nexus
from nexus.cli.app import app
from tests.support import serving_cli

runner = CliRunner()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Nexus]:
    with serving_cli(tmp_path, monkeypatch) as graph:
        yield graph


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_entities_are_created_shown_and_given_contacts(server: Nexus) -> None:
    created = _run("entity", "create", "Ada Lovelace", "--owner", "--json")
    entity_id = created.split('"id": "')[1].split('"')[0]
    assert _run("entity", "attach", entity_id, "sms:+15550001") == f"sms:+15550001 -> {entity_id}\n"
    shown = _run("entity", entity_id)  # `nexus entity ID` shows it
    assert f"{entity_id}  Ada Lovelace  (owner)" in shown
    assert "contact sms:+15550001" in shown
    assert re.search(r"last seen: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", shown)
    _run("entity", "rename", entity_id, "Ada")
    _run("entity", "principal", entity_id, "known")
    assert "Ada  (known)" in _run("entity", "show", entity_id)
    assert entity_id in _run("entities")
    detached = _run("entity", "detach", entity_id, "sms:+15550001")
    assert detached.startswith("sms:+15550001 -> ent_")
    refused = runner.invoke(app, ["entity", "attach", entity_id, "no-colon"])
    assert refused.exit_code == 2 and "PLATFORM:SENDER" in refused.output
    missing = runner.invoke(app, ["entity", "ent_nobody"])
    assert missing.exit_code == 1 and "no entity" in missing.output


def test_aliases_are_added_listed_and_removed_and_circles_refused(server: Nexus) -> None:
    for label in ("support", "team"):
        runner.invoke(app, ["send", label, "hi"])  # creates the sessions
    assert _run("alias", "add", "help", "support") == "alias help -> support\n"
    listed = _run("aliases")
    assert "help" in listed and "manual" in listed
    circle = runner.invoke(app, ["alias", "add", "support", "help"])
    assert circle.exit_code == 1 and "'help' leads to 'support'" in circle.output
    assert _run("alias", "remove", "help") == "removed alias help (it led to support)\n"
    gone = runner.invoke(app, ["alias", "remove", "help"])
    assert gone.exit_code == 1 and "no alias" in gone.output


def test_configure_shows_sets_and_clears_settings_and_archive_refuses_messages(
    server: Nexus,
) -> None:
    runner.invoke(app, ["send", "tuned", "hi"])
    shown = _run("configure", "tuned")
    assert "cap: 20  (default)" in shown and "mode: by message source  (default)" in shown
    detail = _run("session", "tuned")
    assert "queue cap: 20 (default)" in detail and "queue mode: by message source" in detail
    changed = _run("configure", "tuned", "--mode", "collect", "--cap", "5", "--debounce-ms", "0")
    assert "cap: 5  (session)" in changed and "mode: collect  (session)" in changed
    assert "debounce_ms: 0  (session)" in changed
    assert "cap: 20  (default)" in _run("configure", "tuned", "--cap", "default")
    bad = runner.invoke(app, ["configure", "tuned", "--cap", "many"])
    assert bad.exit_code == 2 and "whole number" in bad.output
    refused = runner.invoke(app, ["configure", "tuned", "--drop", "random"])
    assert refused.exit_code == 1 and "422" in refused.output
    assert _run("archive", "tuned") == "archived tuned\n"
    blocked = runner.invoke(app, ["send", "tuned", "more"])
    assert blocked.exit_code == 1 and "archived" in blocked.output
    assert _run("unarchive", "tuned") == "unarchived tuned\n"
    assert runner.invoke(app, ["send", "tuned", "more"]).exit_code == 0


def test_session_shows_what_runs_and_what_waits_and_queue_numbers_the_line(
    server: Nexus,
) -> None:
    for text in ("one", "two"):
        _run("send", "line", text)
    shown = _run("session", "line")
    assert "running: nothing" in shown and "pending: 2 item(s), the oldest for" in shown
    listed = _run("queue", "line")
    assert "waited" in listed and " 1 " in listed and " 2 " in listed


def test_tree_marks_a_turn_on_its_way_from_the_running_server(server: Nexus) -> None:
    _run("send", "busy", "hello")
    session_id = json.loads(_run("session", "busy", "--json"))["id"]
    assert "running" not in _run("tree", "busy")
    lease = server.coordination.acquire(f"session:{session_id}", 30_000)
    assert lease is not None
    started = {"turn_id": "01TURN", "worker": "w1:7", "started_at": 1}
    server.coordination.publish(session_id, "session.started", started)
    shown = _run("tree", "busy")
    assert "running  starting on w1:7 (turn 01TURN)" in shown
    assert json.loads(_run("tree", "busy", "--json"))["running"]["turn_id"] == "01TURN"
    lease.release()
