"""`nexus doctor` names what a half-configured Gmail channel lacks, and never a secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nexus.doctor import check_gmail
from nexus.settings import Settings

OAUTH = json.dumps({"client_id": "c-1", "client_secret": "s3cret-77", "refresh_token": "r-88"})
HOSTS = "oauth2.googleapis.com,gmail.googleapis.com"


def _settings(**fields: Any) -> Settings:
    return Settings(**fields)


def _whole(**extra: Any) -> Settings:
    return _settings(
        gmail_mailbox="bot@example.com",
        gmail_credential="gmail",
        gmail_push_token="push-secret",
        gmail_topic="projects/acme/topics/gmail",
        **extra,
    )


def test_gmail_unset_is_off_and_fine() -> None:
    check = check_gmail(_settings(), environ={})
    assert (check.status, check.detail) == ("ok", "not configured: the Gmail channel is off")


def test_a_whole_configuration_is_ok() -> None:
    environ = {"NEXUS_CREDENTIAL_GMAIL": OAUTH, "NEXUS_CREDENTIAL_GMAIL_HOSTS": HOSTS}
    check = check_gmail(_whole(), environ=environ)
    assert check.status == "ok" and "bot@example.com" in check.detail


def test_a_mailbox_without_its_credential_names_what_is_missing() -> None:
    check = check_gmail(_settings(gmail_mailbox="bot@example.com"), environ={})
    assert check.status == "fail"
    assert "NEXUS_GMAIL_CREDENTIAL is not set" in check.detail
    assert "NEXUS_GMAIL_PUSH_TOKEN is not set" in check.detail
    assert "NEXUS_GMAIL_TOPIC is not set" in check.detail


def test_a_push_token_alone_names_the_mailbox_and_credential() -> None:
    check = check_gmail(_settings(gmail_push_token="push-secret"), environ={})
    assert check.status == "fail"
    assert "NEXUS_GMAIL_MAILBOX is not set" in check.detail
    assert "NEXUS_GMAIL_CREDENTIAL is not set" in check.detail


def test_a_credential_not_set_or_incomplete_or_going_nowhere_is_named_without_its_value() -> None:
    missing = check_gmail(_whole(), environ={})
    assert "credential 'gmail' is not set (NEXUS_CREDENTIAL_GMAIL)" in missing.detail
    partial = json.dumps({"client_id": "c-1", "client_secret": "s3cret-77"})
    lacking = check_gmail(_whole(), environ={"NEXUS_CREDENTIAL_GMAIL": partial})
    assert lacking.status == "fail" and "it lacks refresh_token" in lacking.detail
    assert "NEXUS_CREDENTIAL_GMAIL_HOSTS=oauth2.googleapis.com,gmail.googleapis.com" in (
        lacking.detail
    )
    assert "s3cret-77" not in lacking.detail


def test_the_credential_may_live_in_the_secrets_file(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"gmail": {"value": OAUTH, "hosts": HOSTS.split(",")}}))
    check = check_gmail(_whole(secrets_file=str(secrets)), environ={})
    assert check.status == "ok", check.detail


def test_without_push_or_watch_it_works_by_the_timer_alone_and_says_so() -> None:
    environ = {"NEXUS_CREDENTIAL_GMAIL": OAUTH, "NEXUS_CREDENTIAL_GMAIL_HOSTS": HOSTS}
    settings = _settings(gmail_mailbox="bot@example.com", gmail_credential="gmail")
    check = check_gmail(settings, environ=environ)
    assert check.status == "warn" and "every minute" in check.detail
