"""Every answer carries X-Request-ID, bound into the request's logs, and is timed.

Pure ASGI, outermost: the request guard's own refusals (400, 401, 413) carry the id and
are timed like any other answer.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from structlog.contextvars import bound_contextvars

from nexus.telemetry import HTTP_DURATION, REQUEST_ID, REQUEST_ID_HEADER, request_id_for

_HEADER = REQUEST_ID_HEADER.lower().encode("latin-1")
UNMATCHED = "unmatched"  # a path no route serves: one label, not one per path tried


def _given(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == _HEADER:
            return str(value.decode("latin-1"))
    return None


def route_template(scope: Scope) -> str:
    """The route's template (`/v1/sessions/{label}`), never the path a caller typed, so the
    metric's labels stay few."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class RequestTracing:
    """Gives each HTTP request its id (the caller's when sane) and times its answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_for(_given(scope))
        status = 500  # what the caller gets if the app fails before it answers
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k != _HEADER]
                headers.append((_HEADER, request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            with bound_contextvars(**{REQUEST_ID: request_id}):
                await self.app(scope, receive, send_with_id)
        finally:
            HTTP_DURATION.labels(route_template(scope), str(status)).observe(
                time.perf_counter() - started
            )
