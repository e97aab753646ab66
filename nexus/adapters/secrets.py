"""Tool credentials from the environment (NEXUS_CREDENTIAL_<ID>) or a secrets file, and
where each may be sent (NEXUS_CREDENTIAL_<ID>_HOSTS, or the file entry's `hosts`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nexus.engine.credentials import CredentialError, env_name, hosts_env_name
from nexus.secrets_file import (
    FileCredential,
    SecretsFileError,
    read_credentials_file,
    split_hosts,
)


class EnvironmentSecrets:
    """A SecretSource: the variable first, then the file. Both are read when a call needs
    a credential, never before, so a rotated secret or a fixed file is used at once."""

    def __init__(self, secrets_file: str | None, environ: Mapping[str, str] | None = None) -> None:
        self._file = Path(secrets_file) if secrets_file else None
        self._environ = environ
        self._cached: tuple[tuple[int, int], dict[str, FileCredential]] | None = None

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
        if found is None or not found.value:
            raise CredentialError(
                f"credential {credential_id!r} is not configured "
                f"(not in NEXUS_SECRETS_FILE {self._file}, and {variable} is unset)"
            )
        return found.value

    def hosts(self, credential_id: str) -> tuple[str, ...]:
        """The variable's list first, then the file entry's; () when neither declares any."""
        environ = os.environ if self._environ is None else self._environ
        declared = environ.get(hosts_env_name(credential_id))
        if declared is not None:
            return split_hosts(declared)
        if self._file is None:
            return ()
        found = self._read(self._file).get(credential_id)
        return found.hosts if found is not None else ()

    def _read(self, path: Path) -> dict[str, FileCredential]:
        try:
            found = path.stat()
        except OSError:
            found = None  # reading says why
        stamp = (found.st_mtime_ns, found.st_size) if found is not None else None
        if stamp is not None and self._cached is not None and self._cached[0] == stamp:
            return self._cached[1]
        try:
            secrets = read_credentials_file(path)
        except SecretsFileError as error:
            raise CredentialError(str(error)) from None
        if stamp is not None:
            self._cached = (stamp, secrets)
        return secrets
