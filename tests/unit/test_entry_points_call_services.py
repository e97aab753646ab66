"""The entry points (route handlers, CLI commands, Celery tasks, beat) call the feature
packages' services, never the repository: a rule written in a service then holds at every
door. A repository call is `uow.ledger.<repository>.<method>(...)` (or any `.ledger.`
attribute chain); importing the ledger's record and error types is fine."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = ("nexus/api", "nexus/cli", "workers", "beat")


def _ledger_calls(source: str, name: str) -> list[str]:
    return [
        f"{name}:{node.lineno}"
        for node in ast.walk(ast.parse(source, name))
        if isinstance(node, ast.Attribute) and node.attr == "ledger"
    ]


def test_no_entry_point_reaches_the_repository() -> None:
    calls = [
        call
        for folder in ENTRY_POINTS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for call in _ledger_calls(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert calls == [], "call a service instead of the repository: " + ", ".join(calls)


def test_the_check_sees_a_repository_call() -> None:
    source = "def f(uow):\n    return uow.ledger.sessions.get('x')\n"
    assert _ledger_calls(source, "probe.py") == ["probe.py:2"]
    assert _ledger_calls("from nexus.ledger.records import SessionRecord\n", "ok.py") == []
