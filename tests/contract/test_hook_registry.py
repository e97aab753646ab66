"""The shared hook registry: workers read it, never rewrite it; registration is explicit."""

from __future__ import annotations

from pathlib import Path

import pytest

from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.hooks.registry import RegistrationRefused, register_directory
from nexus.ledger.records import EventDraft
from nexus.settings import Settings

QUIET = """
from nexus.hooks.spec import HookContext, HookMeta, HookResult
HOOK = HookMeta(name="{name}")
def evaluate(ctx: HookContext) -> HookResult:
    return HookResult()
"""


def _directory(root: Path, *names: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / f"{name}.py").write_text(QUIET.format(name=name))
    return root


def _register(database: Database, directory: Path, *, allow_empty: bool = False) -> list[str]:
    graph = bootstrap(Settings(hooks_dir=str(directory)), database=database)
    problems: list[str] = []
    runner = graph.fresh_hook_runner(on_problem=problems.append)
    summary = register_directory(runner, directory, problems, allow_empty=allow_empty)
    return list(summary.disabled)


def _enabled(database: Database) -> dict[str, bool]:
    with database.unit_of_work() as uow:
        return {row.name: row.enabled for row in uow.ledger.hooks.all()}


def _worker_sees(database: Database, directory: Path, event_id: str) -> list[str]:
    """A worker started with `directory` runs the hooks on one event: the hooks it called."""
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(
            EventDraft(id=event_id, adapter="api", platform="api", text="x", occurred_at=0)
        )
        uow.commit()
    graph = bootstrap(
        Settings(hooks_dir=str(directory)), database=database, doorbell=RecordingDoorbell()
    )
    return sorted(i.hook.meta.name for i in graph.run_hooks(event_id))


@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_a_worker_without_hooks_changes_nothing_in_the_registry(
    database: Database, tmp_path: Path, kind: str
) -> None:
    _register(database, _directory(tmp_path / "deployed", "alpha", "beta"))
    bare = tmp_path / "bare"
    if kind == "empty":
        bare.mkdir()
    assert _worker_sees(database, bare, "api:1") == []
    assert _enabled(database) == {"alpha": True, "beta": True}
    # The workers that have the files still run them.
    assert _worker_sees(database, tmp_path / "deployed", "api:2") == ["alpha", "beta"]


def test_a_worker_runs_only_hooks_loaded_here_and_enabled_in_the_registry(
    database: Database, tmp_path: Path
) -> None:
    _register(database, _directory(tmp_path / "hooks", "alpha", "beta"))
    _directory(tmp_path / "hooks", "gamma")  # on this machine, never registered
    with database.unit_of_work() as uow:
        uow.ledger.hooks.set_enabled("beta", False)
        uow.commit()
    assert _worker_sees(database, tmp_path / "hooks", "api:1") == ["alpha"]
    assert _enabled(database) == {"alpha": True, "beta": False}


def test_registering_a_directory_adds_and_retires_hooks(database: Database, tmp_path: Path) -> None:
    assert _register(database, _directory(tmp_path / "v1", "alpha", "beta")) == []
    assert _register(database, _directory(tmp_path / "v2", "beta", "gamma")) == ["alpha"]
    assert _enabled(database) == {"alpha": False, "beta": True, "gamma": True}


def test_registering_a_missing_empty_or_broken_directory_is_refused(
    database: Database, tmp_path: Path
) -> None:
    _register(database, _directory(tmp_path / "hooks", "alpha"))
    with pytest.raises(RegistrationRefused, match="no directory"):
        _register(database, tmp_path / "nowhere")
    with pytest.raises(RegistrationRefused, match="no hooks"):
        _register(database, _directory(tmp_path / "empty"))
    broken = _directory(tmp_path / "broken", "beta")
    (broken / "oops.py").write_text("this is not python")
    with pytest.raises(RegistrationRefused, match=r"oops\.py"):
        _register(database, broken)
    assert _enabled(database) == {"alpha": True}
    # Emptying the registry on purpose is allowed, when said.
    assert _register(database, _directory(tmp_path / "empty"), allow_empty=True) == ["alpha"]
    assert _enabled(database) == {"alpha": False}
