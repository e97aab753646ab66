"""The project is self-contained: no file points a reader at a document outside the
repository (the design notes and specifications it was built from). A decision a comment,
a docstring or a doc relies on is written in `docs/`, and the reference names that page.

Test fixtures may cite their public sources, so `tests/fixtures/` is not scanned; nor is
this file, which has to spell the pattern out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (
    "nexus",
    "workers",
    "beat",
    "hooks",
    "docs",
    "deploy",
    "bench",
    "tests",
    "README.md",
    "pyproject.toml",
    "docker-compose.yml",
)
SKIPPED = (Path("tests/fixtures"), Path(__file__).resolve().relative_to(ROOT))
SKIPPED_DIRS = {"__pycache__", "node_modules"}
PRIVATE_REFERENCE = re.compile(
    r"DESIGN( §|\.md| rule)|[Ss]eeds? 00[0-9]|the seeds?\b|INTERFACES\.md|shared/"
)


def _text_files() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in candidates:
            relative = path.relative_to(ROOT)
            if not path.is_file() or any(
                part in SKIPPED_DIRS or part.startswith(".") for part in relative.parts
            ):
                continue
            if any(relative == skip or skip in relative.parents for skip in SKIPPED):
                continue
            found.append(path)
    return found


def _references(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []  # binary (an image, a compiled file): no prose to point anywhere
    relative = path.relative_to(ROOT)
    return [
        f"{relative}:{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if PRIVATE_REFERENCE.search(line)
    ]


def test_nothing_points_outside_the_repository() -> None:
    found = [reference for path in _text_files() for reference in _references(path)]
    assert found == [], (
        "references to documents outside the repository; write the decision in docs/ and "
        "point at that page instead:\n" + "\n".join(found)
    )


def test_the_scan_covers_code_docs_and_tests_but_not_fixtures() -> None:
    scanned = {path.relative_to(ROOT) for path in _text_files()}
    for expected in (
        "README.md",
        "docs/ledger.md",
        "nexus/settings.py",
        "workers/tasks.py",
        "deploy/policies.yaml",
        "tests/unit/test_bootstrap.py",
    ):
        assert Path(expected) in scanned
    assert not any(Path("tests/fixtures") in path.parents for path in scanned)
    assert Path("tests/unit/test_self_contained.py") not in scanned


def test_the_pattern_finds_each_kind_of_reference() -> None:
    for private in (
        "(DESIGN §5)",
        "see DESIGN.md",
        "(DESIGN rule 8)",
        "seed 002's forward lookup",
        "Seeds 002/004",
        "as in the seed schema",
        "names in INTERFACES.md",
        "../shared/payloads/",
    ):
        assert PRIVATE_REFERENCE.search(private), private
    for own in (
        '(docs/runtime.md, "Queue modes")',
        "(docs/architecture.md, invariant 3)",
        "a seeded random generator",
        "the design of the queue",
    ):
        assert PRIVATE_REFERENCE.search(own) is None, own
