"""The workspace layer: which files, in what order, how they are capped, and when re-read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from nexus.engine.workspace import (
    MAX_PERSONAS_KEPT,
    TRUNCATED_NOTE,
    Workspace,
    default_directory,
)


def test_the_files_are_read_in_order_under_their_names(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("Warm and exact.\n")
    (tmp_path / "AGENTS.md").write_text("Answer in French.\n")
    (tmp_path / "NOTES.md").write_text("not a workspace file")
    text = Workspace(tmp_path).layer()
    assert text == (
        "[Workspace file AGENTS.md]\nAnswer in French.\n\n[Workspace file SOUL.md]\nWarm and exact."
    )


def test_a_turn_does_not_read_unchanged_files_again(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("first rules")
    workspace = Workspace(tmp_path)
    assert "first rules" in workspace.layer()
    assert "first rules" in workspace.layer()
    assert workspace.reads == 1
    agents.write_text("second rules, longer")
    stat = agents.stat()
    os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert "second rules, longer" in workspace.layer()
    assert workspace.reads == 2
    (tmp_path / "USER.md").write_text("Ada, in Lisbon")  # a new file counts as a change
    assert "Ada, in Lisbon" in workspace.layer()
    assert workspace.reads == 3


def test_a_file_over_the_cap_is_cut_and_logged(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * 50)
    (tmp_path / "IDENTITY.md").write_text("b" * 50)
    (tmp_path / "SOUL.md").write_text("c" * 10)
    workspace = Workspace(tmp_path, file_cap=30, total_cap=40)
    with capture_logs() as logs:
        text = workspace.layer()
    assert f"[Workspace file AGENTS.md]\n{'a' * 30}{TRUNCATED_NOTE}" in text
    assert f"[Workspace file IDENTITY.md]\n{'b' * 10}{TRUNCATED_NOTE}" in text  # what was left
    assert "SOUL.md" not in text  # no room
    cut = [entry for entry in logs if entry["event"] == "workspace.file_truncated"]
    assert [Path(entry["file"]).name for entry in cut] == ["AGENTS.md", "IDENTITY.md", "SOUL.md"]
    assert cut[0]["chars"] == 50 and cut[0]["kept"] == 30


def test_no_directory_or_no_files_is_no_layer(tmp_path: Path) -> None:
    assert Workspace(None).layer() == ""
    assert Workspace(tmp_path).layer() == ""
    assert Workspace(tmp_path / "missing").layer() == ""


def test_the_directory_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_directory(None) is None  # no ./workspace here
    (tmp_path / "workspace").mkdir()
    assert default_directory(None) == tmp_path / "workspace"
    assert default_directory("") is None  # set empty: none, even with ./workspace
    assert default_directory(str(tmp_path / "elsewhere")) == tmp_path / "elsewhere"


def test_a_persona_s_own_copy_replaces_the_shared_file(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("shared rules")
    (tmp_path / "SOUL.md").write_text("shared soul")
    own = tmp_path / "personas" / "scout"
    own.mkdir(parents=True)
    (own / "SOUL.md").write_text("the scout's soul")
    workspace = Workspace(tmp_path)
    scout = workspace.layer("scout")
    assert "shared rules" in scout and "the scout's soul" in scout
    assert "shared soul" not in scout
    assert "shared soul" in workspace.layer("atlas")  # no copy of its own
    assert "shared soul" in workspace.layer(None)
    workspace.layer("scout")
    assert workspace.reads == 3  # once per persona, then from memory
    # A name that is not a plain directory name never leaves the workspace.
    (tmp_path / "personas" / "SOUL.md").write_text("not a persona's")
    assert "shared soul" in workspace.layer("..") and "shared soul" in workspace.layer("a/b")


def test_the_layers_kept_are_bounded_by_personas_and_reread_when_evicted(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Be brief.")
    workspace = Workspace(tmp_path)
    for number in range(MAX_PERSONAS_KEPT + 5):
        assert "Be brief." in workspace.layer(f"persona-{number}")
    assert workspace.reads == MAX_PERSONAS_KEPT + 5
    assert "Be brief." in workspace.layer(f"persona-{MAX_PERSONAS_KEPT + 4}")  # still kept
    assert workspace.reads == MAX_PERSONAS_KEPT + 5
    assert "Be brief." in workspace.layer("persona-0")  # evicted: read again
    assert workspace.reads == MAX_PERSONAS_KEPT + 6
