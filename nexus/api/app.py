"""The FastAPI application factory: nothing is built until it is called."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import SecretStr
from starlette.exceptions import HTTPException

from nexus import __version__
from nexus.adapters.inbound.base import Rejected
from nexus.api import (
    agents,
    aliases,
    console,
    entities,
    events,
    files,
    hooks,
    inbound,
    operations,
    operator,
    route,
    session_detail,
    session_events,
    sessions,
    turns,
    usage,
    workers,
)
from nexus.api.auth import TokenCheck
from nexus.api.deps import ApiState, attach
from nexus.api.errors import (
    DOMAIN_ERRORS,
    UNAVAILABLE,
    ApiError,
    api_error_handler,
    archived_handler,
    domain_error_handler,
    error_body,
    rejected_handler,
    unavailable_handler,
)
from nexus.api.middleware import RequestGuard
from nexus.api.tracing import RequestTracing
from nexus.api.validation import field_errors, summary
from nexus.bootstrap import Nexus
from nexus.ledger.repository import SessionArchived


async def _validation_handler(_request: object, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    errors = error.errors()
    return JSONResponse(
        error_body("invalid_request", summary(errors), field_errors(errors)), status_code=422
    )


async def _http_error_handler(_request: object, error: Exception) -> JSONResponse:
    """Starlette's own errors (no such route, method not allowed) in the one error shape."""
    assert isinstance(error, HTTPException)
    kinds = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
    kind = kinds.get(error.status_code, "http_error")
    return JSONResponse(
        error_body(kind, str(error.detail)), status_code=error.status_code, headers=error.headers
    )


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def create_app(nexus: Nexus, *, open_on_loopback: bool = False) -> FastAPI:
    """An app over one object graph (the entry point bootstraps it).

    `open_on_loopback` lets callers on this machine in without a token when no
    NEXUS_API_TOKENS are set; only the embedded `nexus dev` asks for it.
    """
    settings = nexus.settings
    # Built now rather than on the first webhook: the adapters import their platforms'
    # libraries, and a request should not pay for that (nor look like it grew the server).
    nexus.inbound_adapters  # noqa: B018
    # /docs and /redoc load Swagger UI's and ReDoc's JS/CSS from the installed package
    # (under /static-offline-docs), not from a CDN: they work offline and behind a firewall.
    app = FastAPIOffline(title="Nexus", version=__version__)
    tokens = TokenCheck.from_setting(
        _secret(settings.api_tokens),
        admin_tokens=_secret(settings.api_admin_tokens),
        open_on_loopback=open_on_loopback,
    )
    attach(app, ApiState(nexus=nexus, tokens=tokens))
    # Before any route or body parser: NUL is 400, the token is checked from the headers,
    # and no /v1 body over the limit is read.
    app.add_middleware(RequestGuard, tokens=tokens, max_body_bytes=settings.max_body_bytes)
    # Outermost (added last): every answer, the guard's refusals too, carries its id.
    app.add_middleware(RequestTracing)
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(Rejected, rejected_handler)
    app.add_exception_handler(SessionArchived, archived_handler)
    for refusal in DOMAIN_ERRORS:
        app.add_exception_handler(refusal, domain_error_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(HTTPException, _http_error_handler)
    for unavailable in UNAVAILABLE:
        app.add_exception_handler(unavailable, unavailable_handler)
    # One router per resource. Order matters only inside one: /v1/sessions ends with its
    # `{label:path}` route, which would otherwise swallow /v1/sessions/{label}/….
    for resource in (
        files,  # /v1/inbound/files: before inbound's `/{adapter}` route
        inbound,
        events,
        entities,
        aliases,
        sessions,
        session_events,  # /v1/sessions/{label}/events: before session_detail's catch-all
        workers,  # /v1/sessions/{label}/workers and /cancel: before session_detail's catch-all
        session_detail,
        agents,
        turns,
        usage,
        route,
        hooks,
        operations,
        operator,
    ):
        app.include_router(resource.router)
    console.mount(app)  # /ui: the web console, a page that calls the routes above
    return app
