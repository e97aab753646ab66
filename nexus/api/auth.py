"""Bearer tokens for /v1: kept as digests, compared in constant time, never logged."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from nexus.api.errors import ApiError

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
# RFC 6750: a 401 names the scheme the caller should have used.
CHALLENGE = {"WWW-Authenticate": "Bearer"}


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Caller:
    """Who called: a bearer token (named by a short digest prefix, never the token) or,
    in `nexus dev` without tokens, this machine."""

    kind: str  # token | loopback
    token: str | None = None
    # An admin token (NEXUS_API_ADMIN_TOKENS), or this machine in `nexus dev`: may post
    # events as a platform Nexus serves, so that their answers go to that platform's chat.
    admin: bool = False

    @property
    def namespace(self) -> str:
        """What scopes the ids this caller chooses: its token's digest prefix."""
        return self.token or "local"


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers=CHALLENGE)


def _parse(tokens: str | None) -> tuple[bytes, ...]:
    return tuple(digest(part.strip()) for part in (tokens or "").split(",") if part.strip())


@dataclass(frozen=True)
class TokenCheck:
    """The configured tokens' digests (admin tokens apart); with none, only loopback
    callers when allowed."""

    digests: tuple[bytes, ...]
    open_on_loopback: bool = False
    admin_digests: tuple[bytes, ...] = ()

    @classmethod
    def from_setting(
        cls, tokens: str | None, *, admin_tokens: str | None = None, open_on_loopback: bool = False
    ) -> TokenCheck:
        return cls(_parse(tokens), open_on_loopback, _parse(admin_tokens))

    def verify(self, authorization: str | None, client_host: str | None) -> Caller:
        """The caller, from the Authorization header alone (no body is needed)."""
        if not self.digests and not self.admin_digests:
            if self.open_on_loopback and client_host in _LOOPBACK:
                return Caller(kind="loopback", admin=True)
            raise _unauthorized("NEXUS_API_TOKENS is not set: /v1 is closed")
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise _unauthorized("send Authorization: Bearer <token>")
        presented = digest(token.strip())
        user, admin = _matches(presented, self.digests), _matches(presented, self.admin_digests)
        if not (user or admin):
            raise _unauthorized("the bearer token is not valid")
        return Caller(kind="token", token=presented.hex()[:8], admin=admin)


def _matches(presented: bytes, known: tuple[bytes, ...]) -> bool:
    # Compare against every digest so the time taken does not say which one matched.
    matched = False
    for candidate in known:
        matched |= hmac.compare_digest(presented, candidate)
    return matched
