"""Credentials (a persona's `permissions.credentials`): which secrets a tool gets; scrubbing.

A persona lists credential ids; a tool declares the ids it needs. The secret itself is
looked up only when a call needs it (a `SecretSource`), handed to that call alone, and
every value the turn stores or shows afterwards has it replaced by `[redacted]`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from nexus.logs import REDACTED
from nexus.secrets_file import CREDENTIAL_ID

ENV_PREFIX = "NEXUS_CREDENTIAL_"
HOSTS_SUFFIX = "_HOSTS"
MAX_CREDENTIALS = 64
# Shorter values could not be scrubbed without mangling ordinary text (as in nexus/logs.py).
MIN_SECRET_LENGTH = 4
T = TypeVar("T")


class CredentialError(Exception):
    """A credential that cannot be handed out (not configured, or its file is bad); the
    message names the credential and the place, never a secret."""


class SecretSource(Protocol):
    def secret(self, credential_id: str) -> str:
        """The secret for the id; CredentialError when there is none."""
        ...

    def hosts(self, credential_id: str) -> tuple[str, ...]:
        """Where the credential may be sent (see nexus/engine/destinations.py); () when it
        declares nowhere, and then no tool sends it anywhere."""
        ...


class NoSecrets:
    """A deployment that configured no credentials."""

    def secret(self, credential_id: str) -> str:
        raise CredentialError(
            f"credential {credential_id!r} is not configured (set {env_name(credential_id)})"
        )

    def hosts(self, credential_id: str) -> tuple[str, ...]:
        return ()


def env_name(credential_id: str) -> str:
    return ENV_PREFIX + credential_id.upper()


def hosts_env_name(credential_id: str) -> str:
    """The variable that declares where the credential may be sent, comma-separated."""
    return env_name(credential_id) + HOSTS_SUFFIX


def credential_ids(value: Any) -> tuple[str, ...]:
    """Read `permissions.credentials`: a list of distinct credential ids."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("permissions.credentials must be a list of credential ids")
    if len(value) > MAX_CREDENTIALS:
        raise ValueError(f"permissions.credentials lists more than {MAX_CREDENTIALS} ids")
    for item in value:
        if not CREDENTIAL_ID.match(item):
            raise ValueError(
                f"permissions.credentials: {item!r} is not a credential id (lower-case letters, "
                "digits and _, starting with a letter, at most 64 characters)"
            )
    if len(set(value)) != len(value):
        raise ValueError("permissions.credentials lists an id twice")
    return tuple(value)


class Secrets(Mapping[str, str]):
    """The secrets one call was given, and where each may be sent; its repr names the ids
    only, so a log of the tool context or a traceback's locals shows no secret."""

    def __init__(
        self,
        values: Mapping[str, str] | None = None,
        hosts: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._values = dict(values or {})
        self._hosts = dict(hosts or {})

    def hosts(self, credential_id: str) -> tuple[str, ...]:
        """The destinations the credential declares; () for none (it may go nowhere)."""
        return self._hosts.get(credential_id, ())

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Secrets({sorted(self._values)})"


class Scrubber:
    """Replaces every secret it was told of with [redacted], deep inside JSON-like values
    and ledger drafts; anything that holds none is returned as it was."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        if len(secret) < MIN_SECRET_LENGTH:
            raise ValueError("a secret shorter than 4 characters cannot be scrubbed")
        self._secrets.add(secret)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def text(self, value: str) -> str:
        # Longest first: a secret containing another leaves no partial leftovers.
        for secret in sorted(self._secrets, key=len, reverse=True):
            value = value.replace(secret, REDACTED)
        return value

    def scrub(self, value: T) -> T:
        if not self._secrets:
            return value
        return self._scrub(value)  # type: ignore[no-any-return]

    def _scrub(self, value: Any) -> Any:
        if isinstance(value, Enum):
            return value
        if isinstance(value, str):
            return self.text(value) if any(s in value for s in self._secrets) else value
        if isinstance(value, dict):
            return {self._scrub(k): self._scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._scrub(item) for item in value)
        if isinstance(value, BaseModel):
            fields = type(value).model_fields
            return value.model_copy(
                update={name: self._scrub(getattr(value, name)) for name in fields}
            )
        return value
