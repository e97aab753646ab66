"""Tool credentials from NEXUS_CREDENTIAL_<ID> or NEXUS_SECRETS_FILE, read at call time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nexus.adapters.secrets import EnvironmentSecrets
from nexus.engine.credentials import CredentialError

SECRET = "tok-from-file-9876"


def test_the_variable_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "secrets.json"
    path.write_text(f'{{"github": "{SECRET}", "slack": "xoxb-file-1"}}')
    source = EnvironmentSecrets(str(path), {"NEXUS_CREDENTIAL_GITHUB": "tok-from-env-1"})
    assert source.secret("github") == "tok-from-env-1"
    assert source.secret("slack") == "xoxb-file-1"


def test_nothing_is_read_until_a_call_needs_it_and_a_changed_file_is_read_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "secrets.toml"
    source = EnvironmentSecrets(str(path), {})  # no file yet: no error at start-up
    with pytest.raises(CredentialError, match=r"secrets\.toml: cannot be read"):
        source.secret("github")
    path.write_text(f'github = "{SECRET}"\n')
    assert source.secret("github") == SECRET
    path.write_text('github = "rotated-secret-1"\n# longer now\n')
    assert source.secret("github") == "rotated-secret-1"


def test_a_bad_file_is_a_clear_error_naming_the_file_and_quoting_no_secret(
    tmp_path: Path,
) -> None:
    path = tmp_path / "secrets.yaml"
    path.write_text(f"github: [{SECRET}\n")
    with pytest.raises(CredentialError) as caught:
        EnvironmentSecrets(str(path), {}).secret("github")
    message = str(caught.value)
    assert message.startswith(f"NEXUS_SECRETS_FILE {path}: not valid YAML")
    assert SECRET not in message
    odd = tmp_path / "secrets.ini"
    odd.write_text(f"github={SECRET}")
    with pytest.raises(CredentialError, match=r"name it \.json, \.toml, \.yaml or \.yml"):
        EnvironmentSecrets(str(odd), {}).secret("github")


def test_a_credential_found_nowhere_says_where_it_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match="set NEXUS_CREDENTIAL_GITHUB, or NEXUS_SECRETS"):
        EnvironmentSecrets(None, {}).secret("github")
    path = tmp_path / "secrets.json"
    path.write_text("{}")
    with pytest.raises(CredentialError, match="not in NEXUS_SECRETS_FILE"):
        EnvironmentSecrets(str(path), {}).secret("github")


def test_the_process_environment_is_read_when_no_mapping_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = EnvironmentSecrets(None)
    monkeypatch.setenv("NEXUS_CREDENTIAL_WEATHER", "set-after-start")
    assert source.secret("weather") == os.environ["NEXUS_CREDENTIAL_WEATHER"]


def test_where_a_credential_may_go_comes_from_its_hosts_variable_or_its_file_entry(
    tmp_path: Path,
) -> None:
    path = tmp_path / "secrets.yaml"
    path.write_text(
        f"github:\n  value: {SECRET}\n  hosts: [api.github.com, '*.github.com']\n"
        "slack: xoxb-file-1\n"
        "weather: {value: wx-file-1, hosts: ['https://api.weather.test/v2/']}\n"
    )
    environ = {"NEXUS_CREDENTIAL_WEATHER_HOSTS": " api.weather.test , ,wx.test:8443"}
    source = EnvironmentSecrets(str(path), environ)
    assert source.secret("github") == SECRET
    assert source.hosts("github") == ("api.github.com", "*.github.com")
    assert source.hosts("slack") == ()  # the plain form declares nowhere
    assert source.hosts("weather") == ("api.weather.test", "wx.test:8443")  # the variable wins
    assert source.hosts("missing") == ()
    assert EnvironmentSecrets(None, {"NEXUS_CREDENTIAL_A_HOSTS": "a.test"}).hosts("a") == (
        "a.test",
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"github": {"hosts": ["a.test"]}}', "the value of 'github' must be a string"),
        ('{"github": {"value": "@", "hosts": "a.test"}}', "the hosts of 'github' must be a list"),
        ('{"github": {"value": "@", "hosts": [""]}}', "the hosts of 'github' must be a list"),
        ('{"github": {"value": "@", "host": ["a"]}}', "'github' has unknown keys: host"),
    ],
)
def test_a_bad_hosts_entry_is_a_clear_error_quoting_no_secret(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "secrets.json"
    path.write_text(text.replace("@", SECRET))
    with pytest.raises(CredentialError) as caught:
        EnvironmentSecrets(str(path), {}).hosts("github")
    assert says in str(caught.value) and SECRET not in str(caught.value)
