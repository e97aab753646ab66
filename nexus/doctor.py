"""Health checks behind `nexus doctor`: each names the problem and the fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import httpx
import redis
from sqlalchemy import text
from sqlalchemy.engine import make_url

from nexus.db.engine import DatabaseDriverMissing, build_engine
from nexus.db.migrate import current_revision, head_revision
from nexus.pricing import PriceTableError, load_prices
from nexus.secrets_file import (
    CREDENTIAL_ID,
    FileCredential,
    SecretsFileError,
    read_credentials_file,
    read_secrets_file,
)
from nexus.settings import SCRIPTED_MODEL, Settings

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None


def _safe_url(url: str) -> str:
    """The URL with any password hidden, fit for printing."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"


def check_database(settings: Settings) -> list[Check]:
    url = settings.database_url
    shown = _safe_url(url)
    try:
        engine = build_engine(url)
    except DatabaseDriverMissing as error:
        return [Check("database", "fail", f"{shown}: {error}", error.install)]
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        current, head = current_revision(engine), head_revision()
    except Exception as error:
        return [
            Check(
                "database",
                "fail",
                f"cannot connect to {shown}: {type(error).__name__}: {error}",
                "start the database or correct NEXUS_DATABASE_URL",
            )
        ]
    finally:
        engine.dispose()
    checks = [Check("database", "ok", f"connected to {shown}")]
    if current == head:
        checks.append(Check("migrations", "ok", f"at head ({head})"))
    else:
        checks.append(
            Check(
                "migrations",
                "fail",
                f"database is at {current or 'an empty schema'}, code expects {head}",
                "run: nexus db upgrade",
            )
        )
    return checks


def check_redis(settings: Settings) -> Check:
    if settings.redis_url is None:
        return Check("redis", "ok", "not configured: embedded, in-process coordination")
    shown = _safe_url(settings.redis_url)
    try:
        redis.Redis.from_url(settings.redis_url, socket_connect_timeout=3).ping()
    except Exception as error:
        return Check(
            "redis",
            "fail",
            f"cannot reach {shown}: {type(error).__name__}: {error}",
            "start Redis or correct NEXUS_REDIS_URL (unset it for the embedded mode)",
        )
    return Check("redis", "ok", f"reachable at {shown}")


def check_broker(settings: Settings) -> Check:
    broker = settings.broker_url
    if broker.startswith("memory://"):
        return Check("broker", "ok", "in-process (memory://): workers run inside this process")
    if broker == settings.redis_url:
        return Check("broker", "ok", "Celery uses the Redis above")
    if broker.startswith(("redis://", "rediss://")):
        try:
            redis.Redis.from_url(broker, socket_connect_timeout=3).ping()
        except Exception as error:
            return Check(
                "broker",
                "fail",
                f"cannot reach {_safe_url(broker)}: {error}",
                "start the broker or correct NEXUS_BROKER_URL",
            )
        return Check("broker", "ok", f"reachable at {_safe_url(broker)}")
    return Check("broker", "warn", f"{_safe_url(broker)} is not checked by doctor")


def check_model(settings: Settings) -> Check:
    model = settings.default_model
    if model == SCRIPTED_MODEL:
        return Check(
            "model",
            "ok",
            "scripted: the offline built-in model answers",
            "set ANTHROPIC_API_KEY to answer with Claude",
        )
    if settings.anthropic_api_key is None:
        return Check(
            "model",
            "fail",
            f"NEXUS_MODEL={model} needs ANTHROPIC_API_KEY, which is not set",
            "set ANTHROPIC_API_KEY, or NEXUS_MODEL=scripted for the offline model",
        )
    return Check("model", "ok", f"{model} via the Anthropic API")


def check_prices(settings: Settings) -> Check:
    """The price table loads, and prices the default model (else its cost is unknown)."""
    try:
        table = load_prices(settings.prices)
    except PriceTableError as error:
        return Check(
            "prices", "fail", str(error), "fix the file, or unset NEXUS_PRICES for the built-in"
        )
    source = f"NEXUS_PRICES={settings.prices}" if settings.prices else "built-in prices"
    model = settings.default_model
    if table.price_of(model) is None:
        return Check(
            "prices",
            "warn",
            f"{model} has no price in the {source} ({table.version}): its usage is unpriced",
            "give it a price in a NEXUS_PRICES file",
        )
    return Check("prices", "ok", f"{source} ({table.version}) price {model}")


def check_secrets(settings: Settings) -> Check:
    """The secrets file reads and parses (a tool would otherwise fail at its first call);
    what it holds is never shown, only how many credentials."""
    if not settings.secrets_file:
        return Check("secrets", "ok", "no NEXUS_SECRETS_FILE: credentials from NEXUS_CREDENTIAL_*")
    try:
        found = read_secrets_file(Path(settings.secrets_file))
    except SecretsFileError as error:
        return Check("secrets", "fail", str(error), "fix the file, or unset NEXUS_SECRETS_FILE")
    return Check("secrets", "ok", f"{settings.secrets_file}: {len(found)} credentials")


# The namespaces run_python's jail needs, tried on the whole filesystem read-only: what
# fails here (user namespaces not allowed, say) fails for the tool too.
SANDBOX_PROBE = (
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "true",
)


def check_sandbox() -> Check:
    """bubblewrap is installed and can make a jail here; a warning otherwise, since only
    run_python needs it (and is refused without it, never run unjailed)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Check(
            "sandbox",
            "warn",
            "bubblewrap (bwrap) is not installed: run_python is refused, never run unsandboxed",
            "apt-get install bubblewrap (needed only by personas granted the sandbox)",
        )
    try:
        probe = subprocess.run(  # noqa: S603 - bwrap from PATH, fixed arguments
            [bwrap, *SANDBOX_PROBE], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        failure = f"{type(error).__name__}: {error}"
    else:
        if probe.returncode == 0:
            return Check("sandbox", "ok", f"{bwrap}: run_python runs in a bubblewrap jail")
        failure = probe.stderr.strip()[-300:] or f"exit status {probe.returncode}"
    return Check(
        "sandbox",
        "warn",
        f"{bwrap} cannot make a jail here, so run_python fails: {failure}",
        "allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0; in a "
        "container, a seccomp or AppArmor profile that permits them)",
    )


def check_credential_hosts(settings: Settings, environ: Mapping[str, str] | None = None) -> Check:
    """Name each credential that declares no host it may be sent to: `http_fetch` sends it
    nowhere. Ids and host lists only, never a secret."""
    environ = os.environ if environ is None else environ
    prefix, suffix = "NEXUS_CREDENTIAL_", "_HOSTS"
    named = {
        name[len(prefix) :].lower(): value
        for name, value in environ.items()
        if name.startswith(prefix)
    }
    # NEXUS_CREDENTIAL_<ID>_HOSTS lists where <ID> may go; it is not a credential itself.
    declared = {name[: -len(suffix)] for name in named if name.endswith(suffix.lower())}
    ids = {name for name, value in named.items() if value and not name.endswith(suffix.lower())}
    entries: dict[str, FileCredential] = {}
    if settings.secrets_file:
        try:
            entries = read_credentials_file(Path(settings.secrets_file))
        except SecretsFileError:
            entries = {}  # check_secrets says what is wrong with it
    ids |= set(entries)
    nowhere = sorted(
        credential
        for credential in ids
        if CREDENTIAL_ID.match(credential)
        and credential not in declared
        and not (credential in entries and entries[credential].hosts)
    )
    if not ids:
        return Check("credential hosts", "ok", "no credentials configured")
    if nowhere:
        return Check(
            "credential hosts",
            "warn",
            f"declare no hosts, so they are sent nowhere: {', '.join(nowhere)}",
            "set NEXUS_CREDENTIAL_<ID>_HOSTS=api.example.com,*.example.com, or give the "
            "entry `hosts: [...]` beside its `value` in NEXUS_SECRETS_FILE",
        )
    return Check("credential hosts", "ok", f"all {len(ids)} credentials declare their hosts")


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


def run_checks(settings: Settings) -> list[Check]:
    return [
        *check_database(settings),
        check_redis(settings),
        check_broker(settings),
        check_model(settings),
        check_prices(settings),
        check_secrets(settings),
        check_sandbox(),
        check_credential_hosts(settings),
        check_gmail(settings),
        check_files(settings),
        check_bluebubbles(settings),
    ]


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
