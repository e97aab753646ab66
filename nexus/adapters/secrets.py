"""Tool credentials from the environment (NEXUS_CREDENTIAL_<ID>) or a secrets file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nexus.engine.credentials import CredentialError, env_name, parse_secrets

_KINDS = {".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}


class EnvironmentSecrets:
    """A SecretSource: the variable first, then the file. Both are read when a call needs
    a credential, never before, so a rotated secret or a fixed file is used at once."""

    def __init__(self, secrets_file: str | None, environ: Mapping[str, str] | None = None) -> None:
        self._file = Path(secrets_file) if secrets_file else None
        self._environ = environ
        self._cached: tuple[tuple[int, int], dict[str, str]] | None = None

    def secret(self, credential_id: str) -> str:
        environ = os.environ if self._environ is None else self._environ
        variable = env_name(credential_id)
        value = environ.get(variable)
        if value:
            return value
        if self._file is None:
            raise CredentialError(
                f"credential {credential_id!r} is not configured "
                f"(set {variable}, or NEXUS_SECRETS_FILE to a file that holds it)"
            )
        found = self._read(self._file).get(credential_id)
        if not found:
            raise CredentialError(
                f"credential {credential_id!r} is not configured "
                f"(not in NEXUS_SECRETS_FILE {self._file}, and {variable} is unset)"
            )
        return found

    def _read(self, path: Path) -> dict[str, str]:
        where = f"NEXUS_SECRETS_FILE {path}"
        kind = _KINDS.get(path.suffix.lower())
        if kind is None:
            raise CredentialError(f"{where}: name it .json, .toml, .yaml or .yml")
        try:
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if self._cached is not None and self._cached[0] == stamp:
                return self._cached[1]
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            raise CredentialError(f"{where}: cannot be read ({reason})") from None
        secrets = parse_secrets(text, kind, where)
        self._cached = (stamp, secrets)
        return secrets
