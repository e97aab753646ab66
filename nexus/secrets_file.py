"""A secrets file (NEXUS_SECRETS_FILE): credential id → secret, as JSON, TOML or YAML."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

# Lower case, so that an id names one environment variable (NEXUS_CREDENTIAL_<ID>).
CREDENTIAL_ID_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
CREDENTIAL_ID = re.compile(CREDENTIAL_ID_PATTERN)
KINDS = {".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}


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
    """The file's mapping, read now."""
    kind = _kind_of(path)
    return parse_secrets(_read_text(path), kind, f"NEXUS_SECRETS_FILE {path}")


def parse_secrets(text: str, kind: str, where: str) -> dict[str, str]:
    """A secrets file's mapping of credential id → secret. `kind` is json, toml or yaml.

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
    secrets: dict[str, str] = {}
    for key, value in loaded.items():
        if not isinstance(key, str) or not CREDENTIAL_ID.match(key):
            raise SecretsFileError(f"{where}: {str(key)[:64]!r} is not a credential id")
        if not isinstance(value, str):
            raise SecretsFileError(f"{where}: the secret of {key!r} must be a string")
        secrets[key] = value
    return secrets


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
