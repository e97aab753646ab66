"""Every input is queued through one function, `nexus.arrival.service.queue_for`: no other
product module inserts queue items (the repository holds the SQL it calls)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("nexus", "workers", "beat")
ENQUEUES = {"enqueue", "enqueue_counting", "enqueue_many"}
ALLOWED = {Path("nexus/arrival/service.py")}
REPOSITORY = Path("nexus/ledger/repository")


def _enqueuers() -> list[str]:
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative in ALLOWED or REPOSITORY in relative.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(relative))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ENQUEUES
                ):
                    found.append(f"{relative}:{node.lineno} calls .{node.func.attr}()")
    return found


def test_only_the_arrival_service_queues_inputs() -> None:
    assert _enqueuers() == []


def test_the_check_finds_an_enqueue(tmp_path: Path) -> None:
    """The scan is not vacuous: the arrival service itself calls both."""
    source = (ROOT / "nexus/arrival/service.py").read_text()
    calls = {
        node.func.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert {"enqueue", "enqueue_counting"} <= calls
