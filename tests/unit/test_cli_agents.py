"""`nexus agents`, `nexus agent …`, `nexus capabilities` against a real server (SQLite)."""

from __future__ import annotations

import json
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


def test_a_persona_is_created_shown_listed_and_edited_with_its_presentation(
    server: Nexus,
) -> None:
    made = json.loads(
        _run(
            "agent", "create", "sage", "--description", "Knows the garden.", "--emoji", "🌱",
            "--tag", "garden", "--tag", "home", "--model", "claude-x", "--max-tokens", "3000",
            "--json",
        )
    )  # fmt: skip
    assert (made["description"], made["emoji"], made["tags"]) == (
        "Knows the garden.",
        "🌱",
        ["garden", "home"],
    )
    assert made["default_model_config"] == {"model": "claude-x", "max_tokens": 3000}
    shown = _run("agent", "sage")  # `nexus agent NAME` shows it
    assert "🌱 sage" in shown and "Knows the garden." in shown
    assert "tags: garden, home" in shown
    assert "model defaults: model=claude-x max_tokens=3000" in shown
    listed = _run("agents")
    assert "sage" in listed and "🌱" in listed and "garden, home" in listed

    edited = json.loads(
        _run("agent", "edit", "sage", "--emoji", "🌵", "--tag", "desert", "--max-tokens",
             "default", "--temperature", "0.5", "--json")
    )  # fmt: skip
    assert (edited["emoji"], edited["tags"]) == ("🌵", ["desert"])
    assert edited["default_model_config"] == {"model": "claude-x", "temperature": 0.5}
    cleared = json.loads(
        _run("agent", "edit", "sage", "--emoji", "default", "--description", "default",
             "--no-tags", "--json")
    )  # fmt: skip
    assert (cleared["emoji"], cleared["description"], cleared["tags"]) == (None, None, [])
    refused = runner.invoke(app, ["agent", "edit", "sage", "--temperature", "2"])
    assert refused.exit_code == 1 and "422" in refused.output
    missing = runner.invoke(app, ["agent", "nobody"])
    assert missing.exit_code == 1 and "no persona named 'nobody'" in missing.output


def test_capabilities_are_listed_with_icon_and_category_and_given_to_a_persona(
    server: Nexus,
) -> None:
    listed = _run("capabilities")
    assert "🌐" in listed and "web" in listed and "http" in listed
    items = json.loads(_run("capabilities", "--json"))
    assert all(c["icon"] and c["category"] for c in items)
    _run("agent", "create", "sage")
    given = _run("agent", "capabilities", "sage", "current_time", "http")
    assert "capabilities: current_time, http" in given
    archived = _run("agent", "archive", "sage")
    assert archived == "archived sage\n"
    assert "sage (archived)" in _run("agents", "--archived")
