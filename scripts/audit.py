"""Audit the locked dependencies for known vulnerabilities (pip-audit, PyPI's advisories).

    python scripts/audit.py            # what ./scripts/test runs

Fails (exit 1) when a package of requirements/app.lock, what Nexus ships, has a known
vulnerability with a fixed release: the fix is ours to make (update the lock, see
docs/operations.md). Reports without failing a vulnerability that has no fixed release yet
(nothing in the lock can change it), one in a tool only the tests use (requirements/
dev.lock: never shipped), and one listed in requirements/audit-ignore.txt (an advisory
that does not apply, with the reason). When the advisory service cannot be reached it
warns and passes: an offline machine still runs the tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHIPPED, TOOLS = ROOT / "requirements" / "app.lock", ROOT / "requirements" / "dev.lock"
IGNORED = ROOT / "requirements" / "audit-ignore.txt"
# What pip-audit (through requests) prints when the service is out of reach.
UNREACHABLE = (
    "ConnectionError",
    "ConnectTimeout",
    "ReadTimeout",
    "ProxyError",
    "SSLError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
)


@dataclass(frozen=True)
class Finding:
    package: str
    version: str
    advisory: str
    fixed_in: tuple[str, ...]

    def __str__(self) -> str:
        fix = f"fixed in {', '.join(self.fixed_in)}" if self.fixed_in else "no fixed release"
        return f"{self.package} {self.version}: {self.advisory} ({fix})"


@dataclass(frozen=True)
class Report:
    findings: list[Finding]
    skipped: list[str]  # packages the service had no data for (not audited)
    packages: int

    @property
    def audited_nothing(self) -> bool:
        """A service that answers but knows none of the packages (a mirror without PyPI's
        JSON API) audited nothing: that is unreachable too, not a clean bill."""
        return self.packages > 0 and len(self.skipped) == self.packages


def read_report(report: dict[str, Any]) -> Report:
    """The vulnerabilities of a pip-audit JSON report, and what it could not audit."""
    found: list[Finding] = []
    skipped: list[str] = []
    dependencies = report.get("dependencies", [])
    for dependency in dependencies:
        if "skip_reason" in dependency:
            skipped.append(dependency["name"])
        for vuln in dependency.get("vulns", []):
            fixed_in = tuple(vuln.get("fix_versions", []))
            found.append(Finding(dependency["name"], dependency["version"], vuln["id"], fixed_in))
    return Report(found, skipped, len(dependencies))


def failing(found: list[Finding], ignored: set[str]) -> list[Finding]:
    """The findings that fail the check: fixable and not ignored."""
    return [f for f in found if f.fixed_in and f.advisory not in ignored]


def ignored_advisories(path: Path = IGNORED) -> set[str]:
    """Advisory ids, one a line, each with its reason after a #."""
    if not path.exists():
        return set()
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line}


def audit(lock: Path) -> Report | None:
    """The lock's report, or None when the advisory service could not be reached."""
    command = [
        sys.executable, "-m", "pip_audit", "--requirement", str(lock), "--disable-pip",
        "--format", "json", "--progress-spinner", "off", "--timeout", "30",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    try:
        report = read_report(json.loads(done.stdout))
    except ValueError:
        if any(sign in done.stderr for sign in UNREACHABLE):
            return None
        raise SystemExit(f"pip-audit failed on {lock.name}:\n{done.stderr[-4000:]}") from None
    return None if report.audited_nothing else report


def main() -> int:
    ignored = ignored_advisories()
    bad: list[Finding] = []
    for lock in (SHIPPED, TOOLS):
        report = audit(lock)
        if report is None:
            print(
                "warning: the vulnerability service is unreachable or has no data; "
                "dependencies not audited",
                file=sys.stderr,
            )
            return 0
        for finding in report.findings:
            print(f"{lock.name}: {finding}")
        if report.skipped:
            print(
                f"warning: {lock.name}: not audited: {', '.join(report.skipped)}", file=sys.stderr
            )
        if lock == SHIPPED:
            bad = failing(report.findings, ignored)
    if bad:
        print(
            f"{len(bad)} known vulnerabilities with a fix in what Nexus ships: update "
            "requirements/app.lock (docs/operations.md, Reproducible installs), or list the "
            "advisory in requirements/audit-ignore.txt with the reason it does not apply",
            file=sys.stderr,
        )
        return 1
    print("no known vulnerability with a fix in what Nexus ships")
    return 0


if __name__ == "__main__":
    sys.exit(main())
