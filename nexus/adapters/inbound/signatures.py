"""What verifying a webhook shares across platforms: the configured secret, the signature
header, and the `sha256=` HMAC that Meta and GitHub both send."""

from __future__ import annotations

import hashlib
import hmac

from nexus.adapters.inbound.base import InboundRequest, SignatureRejected


class SecretAdapter:
    """An inbound adapter checked against one configured secret; until it is set, every
    request is refused with the setting that would turn the adapter on."""

    name: str
    configured_by: str  # the environment variable that configures the secret

    def __init__(self, secret: str | None) -> None:
        self._secret = secret

    def configured_secret(self) -> str:
        """The secret, or a SignatureRejected saying which setting is missing."""
        if not self._secret:
            raise SignatureRejected(f"{self.configured_by} is not set: {self.name} is off")
        return self._secret


def required_headers(request: InboundRequest, *names: str) -> list[str]:
    """The headers' values as sent (blank included), or a SignatureRejected when any is
    absent ("missing A or B header")."""
    values = [value for value in map(request.header, names) if value is not None]
    if len(values) < len(names):
        raise SignatureRejected(f"missing {' or '.join(names)} header")
    return values


def required_header(request: InboundRequest, name: str) -> str:
    """The header's value as sent (blank included), or a SignatureRejected when absent."""
    return required_headers(request, name)[0]


def check_sha256_signature(request: InboundRequest, secret: str, header: str) -> None:
    """`header` must be `sha256=` and the hex HMAC-SHA256 of the body under `secret`."""
    given = required_header(request, header)
    digest = hmac.new(secret.encode(), request.body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.encode(), f"sha256={digest}".encode()):
        raise SignatureRejected(f"{header} does not match the body")
