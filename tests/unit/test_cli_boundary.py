"""Operating Nexus needs no database credentials: every CLI command module talks to the API,
and only the commands that must reach the database themselves import it."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "nexus" / "cli"
# `nexus db upgrade`, `nexus dev` and the process commands (`api`, `worker`, `beat`,
# `flower`); even the hook tools (`nexus hooks sync`, `nexus hooks test`) go through the API.
ALLOWED = {"database.py", "dev.py", "processes.py"}
FORBIDDEN = (
    "nexus.bootstrap",
    "nexus.db",
    "nexus.ledger",
    "nexus.ingest",
    "nexus.arrival",
    "nexus.sessions",
)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module the file imports, at the top or inside a function."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def _reaches_the_ledger(module: str) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in FORBIDDEN)


def test_cli_command_modules_reach_the_ledger_only_through_the_api() -> None:
    offenders = [
        f"nexus/cli/{path.name}:{line}: {module}"
        for path in sorted(CLI.glob("*.py"))
        if path.name not in ALLOWED
        for line, module in _imports(path)
        if _reaches_the_ledger(module)
    ]
    assert offenders == []


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text(
        "def f():\n    from nexus.bootstrap import bootstrap\n    from nexus import db\n"
    )
    assert [m for _, m in _imports(sneaky) if _reaches_the_ledger(m)] == [
        "nexus.bootstrap",
        "nexus.bootstrap.bootstrap",
        "nexus.db",
    ]
