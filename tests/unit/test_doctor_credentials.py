"""`nexus doctor` names the credentials that declare no hosts (they are sent nowhere)."""

from __future__ import annotations

from pathlib import Path

from nexus.doctor import check_credential_hosts
from nexus.settings import Settings

SECRET = "ghp_doctor-never-shows-1234"


def test_credentials_without_hosts_are_named_and_their_secrets_are_not(tmp_path: Path) -> None:
    path = tmp_path / "secrets.yaml"
    path.write_text(
        f"github: {SECRET}\n"
        f"weather: {{value: {SECRET}x, hosts: [api.weather.test]}}\n"
        f"slack: {SECRET}y\n"
    )
    environ = {
        "NEXUS_CREDENTIAL_JIRA": SECRET + "z",
        "NEXUS_CREDENTIAL_SLACK_HOSTS": "slack.com",
        "NEXUS_CREDENTIAL_LINEAR": SECRET + "w",
        "NEXUS_CREDENTIAL_LINEAR_HOSTS": "api.linear.app",
    }
    check = check_credential_hosts(Settings(secrets_file=str(path)), environ)
    assert check.status == "warn"
    assert check.detail == "declare no hosts, so they are sent nowhere: github, jira"
    assert check.fix is not None and "NEXUS_CREDENTIAL_<ID>_HOSTS" in check.fix
    assert SECRET not in f"{check}"


def test_all_declared_or_none_configured_is_ok(tmp_path: Path) -> None:
    assert check_credential_hosts(Settings(), {}).detail == "no credentials configured"
    environ = {"NEXUS_CREDENTIAL_A": SECRET, "NEXUS_CREDENTIAL_A_HOSTS": "a.test"}
    check = check_credential_hosts(Settings(), environ)
    assert check.status == "ok" and check.detail == "all 1 credentials declare their hosts"
