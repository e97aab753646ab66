"""The request guard: what every request must pass before a route (or its body parser) runs."""

from __future__ import annotations

from urllib.parse import unquote

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nexus.api.auth import TokenCheck
from nexus.api.errors import ApiError

V1 = "/v1/"
# Platform webhooks carry the platform's signature instead of a bearer token.
UNAUTHENTICATED = ("/v1/inbound/",)
# ...but for uploads, which come from the deployment's own clients with a bearer token.
AUTHENTICATED_INBOUND = frozenset({"/v1/inbound/files", "/v1/inbound/files/"})


class BodyTooLarge(HTTPException):
    """Raised from `receive` once a streamed body passes the limit. An HTTPException, so
    FastAPI's body parser lets it through as it is rather than calling it a parse error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the body exceeds the limit of {limit} bytes")


def nul_in(scope: Scope) -> bool:
    """NUL anywhere in the path or the (percent-decoded) query: no database column holds it."""
    query = scope.get("query_string", b"").decode("latin-1")
    return "\x00" in scope["path"] or "\x00" in unquote(query)


def declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError as error:
                raise ApiError(
                    400, "malformed_request", "Content-Length is not a number"
                ) from error
    return None


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope["headers"]:
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


class RequestGuard:
    """Pure ASGI (no buffering): NUL in the path or query is 400 on every route; a /v1
    caller is authenticated from the headers before the body is touched (401); a /v1 body
    declared over `max_body_bytes` is 413 before it is read, and one streamed past it is
    abandoned there, so no request makes the process hold more than the limit."""

    def __init__(self, app: ASGIApp, *, tokens: TokenCheck, max_body_bytes: int) -> None:
        self.app = app
        self.tokens = tokens
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check(scope)
        except ApiError as refused:
            await refused.response()(scope, receive, send)
            return
        if scope["path"].startswith(V1):
            receive = self._capped(receive)
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> None:
        if nul_in(scope):
            raise ApiError(400, "malformed_request", "the path or query contains NUL (%00)")
        path: str = scope["path"]
        if not path.startswith(V1):
            return
        if not path.startswith(UNAUTHENTICATED) or path in AUTHENTICATED_INBOUND:
            client = scope.get("client")
            caller = self.tokens.verify(
                _header(scope, b"authorization"), client[0] if client else None
            )
            # The route's `caller` dependency reads it from here rather than checking again.
            scope.setdefault("state", {})["caller"] = caller
        declared = declared_length(scope)
        if declared is not None and declared > self.limit:
            raise ApiError(
                413, "payload_too_large", f"the body exceeds the limit of {self.limit} bytes"
            )

    def _capped(self, receive: Receive) -> Receive:
        received = 0

        async def capped() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        return capped
