"""`nexus configure --model/--thinking/…`, `nexus send --thinking …`, and a turn's thinking
and model configuration in `nexus turn` and `nexus tree` (SQLite, a real server)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nexus.adapters.scripted import CallTools, Say, ScriptedModel
from nexus.bootstrap import Nexus
from nexus.cli.app import app
from nexus.engine.query import QueryMessage
from tests.support import serving_cli

runner = CliRunner()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Nexus]:
    for name in ("NEXUS_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with serving_cli(tmp_path, monkeypatch) as graph:
        yield graph


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_configure_sets_shows_and_clears_the_sessions_model_settings(server: Nexus) -> None:
    _run("send", "chat", "hi")
    shown = _run("configure", "chat")
    assert "model: scripted  (default)" in shown and "thinking: off  (default)" in shown
    changed = _run("configure", "chat", "--model", "claude-x", "--thinking", "2048")
    assert "model: claude-x  (session)" in changed and "thinking: 2048  (session)" in changed
    assert "max_tokens: 6144  (default)" in changed
    refused = runner.invoke(app, ["configure", "chat", "--temperature", "0.5"])
    assert refused.exit_code == 1 and "422" in refused.output and "thinking" in refused.output
    bad = runner.invoke(app, ["configure", "chat", "--thinking", "lots"])
    assert bad.exit_code == 2 and "number" in bad.output
    cleared = _run("configure", "chat", "--thinking", "default", "--temperature", "0.5")
    assert "thinking: off  (default)" in cleared and "temperature: 0.5  (session)" in cleared
    assert "model: claude-x  (session)" in cleared


def test_send_carries_the_turns_own_model_settings(server: Nexus) -> None:
    sent = json.loads(_run("send", "chat", "think", "--thinking", "1024", "--model", "m", "--json"))
    with server.database.unit_of_work() as uow:
        event = uow.ledger.events.get(sent["event_id"])
    assert event is not None
    assert event.model_overrides == {
        "model": "m",
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    refused = runner.invoke(app, ["send", "chat", "x", "--thinking", "100"])
    assert refused.exit_code == 1 and "at least 1024" in refused.output


def test_turn_and_tree_show_the_thinking_and_the_model_settings(server: Nexus) -> None:
    model = ScriptedModel.with_script(
        CallTools((("current_time", {}),), thinking="What time is it there?"),
        Say("It is noon.", thinking="The clock says noon."),
    )
    turns = dataclasses.replace(server.turns, model_for=lambda name: model)
    _run("send", "chat", "hello")  # creates the session
    with server.database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve("chat")
        assert session is not None
        epoch = uow.ledger.sessions.claim(session.id)
        uow.commit()
    query = QueryMessage("what time?", model_overrides={"thinking": {"budget_tokens": 2048}})
    turn_id = turns.run_turn(session.id, [query], epoch=epoch).turn_id
    shown = _run("turn", turn_id)
    assert "model=scripted thinking=2048 max_tokens=6144" in shown
    assert "[thinking] What time is it there?" in shown
    assert "[thinking] The clock says noon." in shown
    # The answer's line shows its text, not the thinking blocks again.
    assert '[assistant] {"text": "It is noon."}' in shown
    assert "thinking: What time is it there?" in _run("tree", "chat")
