"""What turns need: the model's key, the price table, the secrets, the sandbox, and where
each credential may be sent."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from nexus.doctor.check import Check
from nexus.pricing import PriceTableError, load_prices
from nexus.secrets_file import (
    CREDENTIAL_ID,
    FileCredential,
    SecretsFileError,
    read_credentials_file,
    read_secrets_file,
)
from nexus.settings import SCRIPTED_MODEL, Settings


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
