"""The channels that need more than a token: the files folder, BlueBubbles, Gmail."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from nexus.doctor.check import Check
from nexus.secrets_file import CREDENTIAL_ID, SecretsFileError, read_credentials_file
from nexus.settings import Settings


def folder_problem(root: str | Path) -> str | None:
    """What keeps Nexus from watching `root` (NEXUS_FILES_DIR), or None."""
    path = Path(root)
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_dir():
        return f"{path} is not a directory"
    if not os.access(path, os.R_OK | os.X_OK):
        return f"{path} is not readable by this user (uid {os.getuid()})"
    try:
        with os.scandir(path) as entries:
            next(entries, None)
    except OSError as error:
        return f"{path} cannot be listed: {error.strerror or error}"
    return None


def check_files(settings: Settings) -> Check:
    """The files channel's watched folder, where one is set."""
    if not settings.files_dir:
        return Check("files", "ok", "no NEXUS_FILES_DIR: no folder watched (uploads still work)")
    problem = folder_problem(settings.files_dir)
    if problem is not None:
        return Check(
            "files",
            "fail",
            f"NEXUS_FILES_DIR: {problem}",
            "create the directory, make it readable by the user the workers run as "
            "(on every worker host), or unset NEXUS_FILES_DIR",
        )
    return Check("files", "ok", f"watching {settings.files_dir}")


def check_bluebubbles(settings: Settings, *, timeout_s: float = 5.0) -> Check:
    """iMessage through BlueBubbles: off, half configured (naming what is missing), or the
    server's ping answered with the password. Never shows the password."""
    named = {
        "NEXUS_BLUEBUBBLES_URL": settings.bluebubbles_url,
        "NEXUS_BLUEBUBBLES_PASSWORD": settings.bluebubbles_password,
        "NEXUS_BLUEBUBBLES_WEBHOOK_SECRET": settings.bluebubbles_webhook_secret,
    }
    if not any(named.values()):
        return Check("bluebubbles", "ok", "not configured: iMessage through BlueBubbles is off")
    needed = ("NEXUS_BLUEBUBBLES_URL", "NEXUS_BLUEBUBBLES_PASSWORD")
    missing = [name for name in needed if not named[name]]
    if missing:
        return Check(
            "bluebubbles",
            "fail",
            f"half configured: {' and '.join(missing)} not set, so iMessage replies and "
            "attachments cannot reach the BlueBubbles server",
            f"set {', '.join(missing)} (the server's URL and its API password)",
        )
    base = str(settings.bluebubbles_url).rstrip("/")
    password = settings.bluebubbles_password
    assert password is not None  # not missing, above
    try:
        response = httpx.get(
            f"{base}/api/v1/ping",
            params={"password": password.get_secret_value()},
            timeout=timeout_s,
            follow_redirects=False,
        )
    except httpx.HTTPError as error:  # its message may hold the URL, and so the password
        return Check(
            "bluebubbles",
            "fail",
            f"cannot reach {base}: {type(error).__name__}",
            "start the BlueBubbles server or correct NEXUS_BLUEBUBBLES_URL",
        )
    if response.status_code == 401:
        return Check(
            "bluebubbles",
            "fail",
            f"{base} refused NEXUS_BLUEBUBBLES_PASSWORD",
            "set it to the server's password (BlueBubbles: Settings, API password)",
        )
    if not response.is_success:
        return Check("bluebubbles", "fail", f"{base} answered its ping with {response.status_code}")
    public = (settings.public_url or "https://<your public URL>").rstrip("/")
    param, setting = (
        ("secret", "NEXUS_BLUEBUBBLES_WEBHOOK_SECRET")
        if settings.bluebubbles_webhook_secret
        else ("password", "NEXUS_BLUEBUBBLES_PASSWORD")
    )
    return Check(
        "bluebubbles",
        "ok",
        f"{base} answers its ping; its webhook (New Messages) goes to "
        f"{public}/v1/inbound/bluebubbles?{param}=<{setting}>",
    )


_GMAIL_FIELDS = ("client_id", "client_secret", "refresh_token")


def _gmail_credential(
    settings: Settings, credential: str, environ: Mapping[str, str]
) -> tuple[str | None, tuple[str, ...], str]:
    """The credential's value and declared hosts, and where they were looked for."""
    variable = f"NEXUS_CREDENTIAL_{credential.upper()}"
    value, hosts = environ.get(variable) or None, environ.get(f"{variable}_HOSTS")
    entry = None
    if settings.secrets_file:
        try:
            entry = read_credentials_file(Path(settings.secrets_file)).get(credential)
        except SecretsFileError:
            entry = None  # check_secrets says what is wrong with the file
    if value is None and entry is not None:
        value = entry.value or None
    declared = tuple(h for h in (hosts or "").split(",") if h.strip())
    if hosts is None and entry is not None:
        declared = entry.hosts
    where = variable + (f" or {settings.secrets_file}" if settings.secrets_file else "")
    return value, declared, where


def check_gmail(settings: Settings, environ: Mapping[str, str] | None = None) -> Check:
    """Gmail's settings hang together: each part named when another is set without it.
    Offline: the credential's fields and declared hosts are read, never shown or used."""
    environ = os.environ if environ is None else environ
    mailbox, credential = settings.gmail_mailbox, settings.gmail_credential
    push, topic = settings.gmail_push_token, settings.gmail_topic
    if not (mailbox or credential or push or topic):
        return Check("gmail", "ok", "not configured: the Gmail channel is off")
    failures: list[str] = []
    warnings: list[str] = []
    if not mailbox:
        failures.append("NEXUS_GMAIL_MAILBOX is not set (the address Nexus reads and answers)")
    if not credential:
        failures.append(
            "NEXUS_GMAIL_CREDENTIAL is not set (the id of the credential holding the OAuth "
            "client and refresh token)"
        )
    elif not CREDENTIAL_ID.match(credential):
        failures.append(f"NEXUS_GMAIL_CREDENTIAL {credential!r} is not a credential id")
    else:
        value, hosts, where = _gmail_credential(settings, credential, environ)
        if value is None:
            failures.append(f"credential {credential!r} is not set ({where})")
        else:
            try:
                found = json.loads(value)
            except ValueError:
                found = None
            fields = found if isinstance(found, dict) else {}
            missing = [name for name in _GMAIL_FIELDS if not fields.get(name)]
            if missing:
                failures.append(
                    f"credential {credential!r} must be JSON with {', '.join(_GMAIL_FIELDS)}; "
                    f"it lacks {', '.join(missing)}"
                )
        if not hosts:
            failures.append(
                f"credential {credential!r} declares no hosts, so it is sent nowhere: set "
                f"NEXUS_CREDENTIAL_{credential.upper()}_HOSTS="
                f"{_host(settings.gmail_token_url)},{_host(settings.gmail_api_base)}"
            )
    if not push:
        warnings.append(
            "NEXUS_GMAIL_PUSH_TOKEN is not set: pushes answer 401 (the timer still reads the "
            "mailbox every minute)"
        )
    if not topic:
        warnings.append(
            "NEXUS_GMAIL_TOPIC is not set: no users.watch, so Gmail pushes nothing (the timer "
            "still reads the mailbox every minute)"
        )
    if failures:
        return Check("gmail", "fail", "; ".join(failures + warnings), "see docs/adapters.md")
    if warnings:
        return Check("gmail", "warn", "; ".join(warnings), "see docs/adapters.md")
    return Check("gmail", "ok", f"{mailbox}: credential {credential!r}, watch on {topic}")


def _host(url: str) -> str:
    return urlsplit(url).hostname or url
