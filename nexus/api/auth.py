"""Bearer tokens for /v1: kept as digests, compared in constant time, never logged."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from fastapi import Request

from nexus.api.errors import ApiError

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class TokenCheck:
    """The configured tokens' digests; with none, only loopback callers when allowed."""

    digests: tuple[bytes, ...]
    open_on_loopback: bool = False

    @classmethod
    def from_setting(cls, tokens: str | None, *, open_on_loopback: bool = False) -> TokenCheck:
        parts = [part.strip() for part in (tokens or "").split(",") if part.strip()]
        return cls(tuple(digest(part) for part in parts), open_on_loopback)

    def verify(self, authorization: str | None, client_host: str | None) -> None:
        if not self.digests:
            if self.open_on_loopback and client_host in _LOOPBACK:
                return
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


def require_token(request: Request) -> None:
    """FastAPI dependency for every authenticated route."""
    check: TokenCheck = request.app.state.nexus.tokens
    client = request.client.host if request.client else None
    check.verify(request.headers.get("authorization"), client)
