"""A secrets file (NEXUS_SECRETS_FILE): credential id → secret, as JSON, TOML or YAML.

Each entry is the secret itself (`github: ghp_…`), or the secret with the destinations it
may be sent to (`github: {value: ghp_…, hosts: [api.github.com]}`).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Lower case, so that an id names one environment variable (NEXUS_CREDENTIAL_<ID>).
CREDENTIAL_ID_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
CREDENTIAL_ID = re.compile(CREDENTIAL_ID_PATTERN)
KINDS = {".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}
MAX_HOSTS = 64  # destinations per credential


@dataclass(frozen=True)
class FileCredential:
    """One entry: the secret, and where it may be sent (() when the entry says nowhere)."""

    value: str
    hosts: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"FileCredential(hosts={self.hosts!r})"  # never the secret


class SecretsFileError(ValueError):
    """A secrets file that cannot be used; the message says where and what is wrong, never
    what the file holds."""


def _kind_of(path: Path) -> str:
    kind = KINDS.get(path.suffix.lower())
    if kind is None:
        raise SecretsFileError(f"NEXUS_SECRETS_FILE {path}: name it .json, .toml, .yaml or .yml")
    return kind


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise SecretsFileError(f"NEXUS_SECRETS_FILE {path}: cannot be read ({reason})") from None


def read_secrets_file(path: Path) -> dict[str, str]:
    """The file's mapping of id → secret, read now."""
    return {key: entry.value for key, entry in read_credentials_file(path).items()}


def read_credentials_file(path: Path) -> dict[str, FileCredential]:
    """The file's entries, with their destinations, read now."""
    kind = _kind_of(path)
    return parse_credentials(_read_text(path), kind, f"NEXUS_SECRETS_FILE {path}")


def parse_secrets(text: str, kind: str, where: str) -> dict[str, str]:
    """A secrets file's mapping of credential id → secret. `kind` is json, toml or yaml."""
    return {key: entry.value for key, entry in parse_credentials(text, kind, where).items()}


def split_hosts(text: str) -> tuple[str, ...]:
    """A comma-separated list of destinations (NEXUS_CREDENTIAL_<ID>_HOSTS), blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def parse_credentials(text: str, kind: str, where: str) -> dict[str, FileCredential]:
    """A secrets file's entries by credential id. `kind` is json, toml or yaml.

    Errors say where and what is wrong, never what the file holds: a parser's own message
    may quote the offending line, which may be a secret.
    """
    try:
        if kind == "json":
            loaded: Any = json.loads(text)
        elif kind == "toml":
            loaded = tomllib.loads(text)
        elif kind == "yaml":
            loaded = yaml.safe_load(text)
        else:
            raise SecretsFileError(f"{where}: unknown format {kind!r} (use .json, .toml or .yaml)")
    except (ValueError, yaml.YAMLError) as error:
        if isinstance(error, SecretsFileError):
            raise
        raise SecretsFileError(f"{where}: not valid {kind.upper()}{_position(error)}") from None
    if not isinstance(loaded, dict):
        raise SecretsFileError(f"{where}: must hold a mapping of credential id to secret")
    secrets: dict[str, FileCredential] = {}
    for key, value in loaded.items():
        if not isinstance(key, str) or not CREDENTIAL_ID.match(key):
            raise SecretsFileError(f"{where}: {str(key)[:64]!r} is not a credential id")
        secrets[key] = _entry(key, value, where)
    return secrets


def _entry(key: str, value: Any, where: str) -> FileCredential:
    if isinstance(value, str):
        return FileCredential(value)
    if not isinstance(value, dict):
        raise SecretsFileError(
            f"{where}: the secret of {key!r} must be a string, or a mapping of value and hosts"
        )
    unknown = set(value) - {"value", "hosts"}
    if unknown:
        shown = ", ".join(sorted(str(name)[:32] for name in unknown))
        raise SecretsFileError(f"{where}: {key!r} has unknown keys: {shown}")
    secret, hosts = value.get("value"), value.get("hosts", [])
    if not isinstance(secret, str):
        raise SecretsFileError(f"{where}: the value of {key!r} must be a string")
    if (
        not isinstance(hosts, list)
        or len(hosts) > MAX_HOSTS
        or not all(isinstance(host, str) and host.strip() for host in hosts)
    ):
        raise SecretsFileError(
            f"{where}: the hosts of {key!r} must be a list of at most {MAX_HOSTS} host names "
            "or URL prefixes"
        )
    return FileCredential(secret, tuple(host.strip() for host in hosts))


def _position(error: BaseException) -> str:
    """Only the line number: TOML's message has it in words, YAML's in a mark."""
    line = getattr(error, "lineno", None)
    mark = getattr(error, "problem_mark", None)
    if line is None and mark is not None:
        line = mark.line + 1
    if line is None:
        found = re.search(r"line (\d+)", str(error))
        line = int(found.group(1)) if found else None
    return f" (line {line})" if line is not None else ""
