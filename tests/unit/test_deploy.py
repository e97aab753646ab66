"""Deployment files reference only commands, files and settings that exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from nexus.cli.app import app
from nexus.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _cli_has(command: list[str]) -> bool:
    """True when `nexus COMMAND --help` works, i.e. the command exists as written."""
    words = [word for word in command if not word.startswith("-")]
    return CliRunner().invoke(app, [*words, "--help"]).exit_code == 0


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_command_check_can_fail() -> None:
    assert not _cli_has(["no-such-command"])
    assert not _cli_has(["db", "downgrade-everything"])


def test_every_nexus_service_runs_a_real_cli_command() -> None:
    services = _compose()["services"]
    nexus_services = {name: s for name, s in services.items() if "build" in s}
    assert {"migrate", "doctor"} <= set(nexus_services)
    for name, service in nexus_services.items():
        assert _cli_has(service["command"]), f"{name}: nexus {service['command']} does not exist"


def test_compose_dependencies_name_existing_services() -> None:
    services = _compose()["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"


def test_compose_environment_uses_known_settings() -> None:
    known = {f"NEXUS_{name.upper()}" for name in Settings.model_fields} | {"NEXUS_BROKER_URL"}
    for service in _compose()["services"].values():
        for variable in service.get("environment", {}):
            if variable.startswith("NEXUS_"):
                assert variable in known, variable


def test_env_example_lists_every_setting() -> None:
    text = (ROOT / "deploy" / "env.example").read_text()
    listed = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))
    expected = {f"NEXUS_{name.upper()}" for name in Settings.model_fields}
    expected = {name.replace("NEXUS_BROKER_URL_OVERRIDE", "NEXUS_BROKER_URL") for name in expected}
    expected = {name.replace("NEXUS_ANTHROPIC_", "ANTHROPIC_") for name in expected}
    assert expected <= listed, sorted(expected - listed)


def test_dockerfile_copies_paths_that_exist() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            *sources, _destination = line.split()[1:]
            for source in sources:
                assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"
    assert "USER nexus" in dockerfile  # never root
