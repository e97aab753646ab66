"""Bearer tokens for /v1: kept as digests, compared in constant time, never logged."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from nexus.api.errors import ApiError

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class Caller:
    """Who called: a bearer token (named by a short digest prefix, never the token) or,
    in `nexus dev` without tokens, this machine."""

    kind: str  # token | loopback
    token: str | None = None


@dataclass(frozen=True)
class TokenCheck:
    """The configured tokens' digests; with none, only loopback callers when allowed."""

    digests: tuple[bytes, ...]
    open_on_loopback: bool = False

    @classmethod
    def from_setting(cls, tokens: str | None, *, open_on_loopback: bool = False) -> TokenCheck:
        parts = [part.strip() for part in (tokens or "").split(",") if part.strip()]
        return cls(tuple(digest(part) for part in parts), open_on_loopback)

    def verify(self, authorization: str | None, client_host: str | None) -> Caller:
        if not self.digests:
            if self.open_on_loopback and client_host in _LOOPBACK:
                return Caller(kind="loopback")
            raise ApiError(401, "unauthorized", "NEXUS_API_TOKENS is not set: /v1 is closed")
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise ApiError(401, "unauthorized", "send Authorization: Bearer <token>")
        presented = digest(token.strip())
        # Compare against every digest so the time taken does not say which one matched.
        matched = False
        for known in self.digests:
            matched |= hmac.compare_digest(presented, known)
        if not matched:
            raise ApiError(401, "unauthorized", "the bearer token is not valid")
        return Caller(kind="token", token=presented.hex()[:8])
