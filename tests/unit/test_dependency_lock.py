"""The lock files pin every dependency pyproject.toml names, within its ranges, with
hashes, for Python 3.11 and up on every platform; and the audit decides as documented."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", flags=re.MULTILINE)


def _pins(lock: str) -> dict[str, str]:
    text = (ROOT / "requirements" / lock).read_text()
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


def _wanted(extras: tuple[str, ...]) -> list[Requirement]:
    """pyproject's requirements for these extras, following the project's own extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(line) for line in project["dependencies"]]
    todo = list(extras)
    while todo:
        for line in project["optional-dependencies"][todo.pop()]:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
                todo += sorted(requirement.extras)
            else:
                found.append(requirement)
    return found


@pytest.mark.parametrize(("lock", "extras"), [("app.lock", ()), ("dev.lock", ("dev",))])
def test_the_lock_pins_every_requirement_within_its_range(
    lock: str, extras: tuple[str, ...]
) -> None:
    pins = _pins(lock)
    for requirement in _wanted(extras):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{lock} does not pin {requirement}: update it (docs/operations.md)"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{lock} pins {name}=={pins[name]}, outside {requirement}"
        )
    text = (ROOT / "requirements" / lock).read_text()
    hashed = re.findall(r"^[A-Za-z0-9_.\-]+==[^\n]*\\\n    --hash=sha256:", text, re.MULTILINE)
    assert len(hashed) == len(pins), "every pin carries its hashes (--generate-hashes)"
    assert "--universal --python-version 3.11 --generate-hashes" in text


def test_the_shipped_and_the_test_installs_agree_on_every_shared_version() -> None:
    app, dev = _pins("app.lock"), _pins("dev.lock")
    assert {name: dev.get(name) for name in app} == app


def _audit() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audit", ROOT / "scripts" / "audit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["audit"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_audit_fails_only_on_a_fixable_advisory_not_ignored() -> None:
    audit = _audit()
    report = audit.read_report(
        {
            "dependencies": [
                {"name": "fixable", "version": "1.0", "vulns": [
                    {"id": "PYSEC-1", "fix_versions": ["1.1"]},
                    {"id": "PYSEC-2", "fix_versions": ["1.2"]},
                ]},
                {"name": "unfixed", "version": "2.0", "vulns": [
                    {"id": "GHSA-x", "fix_versions": []},
                ]},
                {"name": "clean", "version": "3.0", "vulns": []},
                {"name": "unknown", "skip_reason": "Dependency not found on PyPI"},
            ]
        }
    )  # fmt: skip
    assert report.skipped == ["unknown"] and not report.audited_nothing
    failing = audit.failing(report.findings, ignored={"PYSEC-2"})
    assert [(f.package, f.advisory) for f in failing] == [("fixable", "PYSEC-1")]
    nothing = audit.read_report({"dependencies": [{"name": "a", "skip_reason": "not found"}]})
    assert nothing.audited_nothing


def test_the_ignore_file_takes_ids_with_their_reasons(tmp_path: Path) -> None:
    listed = tmp_path / "audit-ignore.txt"
    listed.write_text("# why each is here\nPYSEC-9  # only in a code path we never call\n\n")
    assert _audit().ignored_advisories(listed) == {"PYSEC-9"}


@pytest.mark.slow
def test_the_audit_passes_with_a_warning_when_the_service_is_out_of_reach() -> None:
    nowhere = "http://127.0.0.1:9"  # the discard port: nothing listens
    environment = {**os.environ, "HTTPS_PROXY": nowhere, "HTTP_PROXY": nowhere}
    environment.pop("NO_PROXY", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "audit.py")],
        env=environment, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not audited" in done.stderr
