"""One error shape for every /v1 answer: {"error": {"type", "message", "details"?}}."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import structlog
from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import InterfaceError, OperationalError

from nexus.adapters.inbound.base import Rejected
from nexus.agents.cancel import NotAWorker
from nexus.api.validation import FieldError
from nexus.engine.model_config import ModelConfigError
from nexus.ledger.repository import LabelTaken, NotForkable, NotFound, SessionDeleted
from nexus.sessions.rollback import NotInChain, TurnRunning
from nexus.sessions.service import InvalidLabel, NotWaiting
from nexus.sessions.session_events import InvalidAfter

log = structlog.get_logger(__name__)

# The database errors that mean "the ledger cannot be reached right now" (refused, reset,
# shutting down), as opposed to a bug; a caller should retry them.
UNAVAILABLE = (OperationalError, InterfaceError)
RETRY_AFTER_S = 5


class ApiError(Exception):
    """An error the API answers with its own status and a message a caller can act on."""

    def __init__(
        self, status: int, kind: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = headers

    def response(self) -> JSONResponse:
        return JSONResponse(
            error_body(self.kind, self.message), status_code=self.status, headers=self.headers
        )


# A route's own answers to a service's errors: the class, and the status and kind it gets.
Answers = Mapping[type[Exception], tuple[int, str]]


@contextmanager
def answering(answers: Answers) -> Iterator[None]:
    """Raise the errors `answers` names as ApiErrors with their status and kind (the first
    class that matches, in order, as `except` clauses would), the message the error's own;
    any other error passes through."""
    try:
        yield
    except tuple(answers) as error:
        status, kind = next(each for cls, each in answers.items() if isinstance(error, cls))
        raise ApiError(status, kind, str(error)) from error


class ErrorDetail(BaseModel):
    type: str  # what went wrong, for code: not_found, invalid_request, conflict, ...
    message: str  # what went wrong, for people: each bad field named, with what it accepts
    # For a request that breaks the schema (422): one entry per bad field, for code.
    details: list[FieldError] | None = None


class ErrorBody(BaseModel):
    """Every error the API answers, whatever its status."""

    error: ErrorDetail


_MEANING = {
    400: "Malformed: NUL in the path or query, a cursor this API did not issue, nothing to do",
    401: "No valid bearer token",
    403: "The token may not do this",
    404: "No such resource",
    409: "The resource's state does not allow it",
    413: "The body is over the size limit",
    422: "A parameter or the body breaks the published schema's rules",
    503: "The ledger or Redis does not answer; retry after Retry-After",
}
# What any /v1 route may answer besides its own: the request guard's 400, 401 and 413, the
# validation's 422 (in this shape, not FastAPI's `detail`), and 503 when the ledger is down.
COMMON = (400, 401, 413, 422, 503)


def error_responses(*statuses: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI `responses=` for the common errors and `statuses`, in the one error shape."""
    return {
        status: {"model": ErrorBody, "description": _MEANING[status]}
        for status in sorted({*COMMON, *statuses})
    }


def error_body(
    kind: str, message: str, details: list[FieldError] | None = None
) -> dict[str, dict[str, object]]:
    body: dict[str, object] = {"type": kind, "message": message}
    if details is not None:
        body["details"] = [detail.model_dump() for detail in details]
    return {"error": body}


async def api_error_handler(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return error.response()


async def rejected_handler(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, Rejected)
    kind = "invalid_signature" if error.status == 401 else "malformed_request"
    return JSONResponse(error_body(kind, error.reason), status_code=error.status)


async def unavailable_handler(request: Request, error: Exception) -> JSONResponse:
    """503 with the usual shape: nothing was recorded, so a platform (or a client) retries;
    never a bare 500, which some platforms treat as final and which drops the connection."""
    assert isinstance(error, UNAVAILABLE)
    log.warning("database_unavailable", path=request.url.path, error=type(error.orig).__name__)
    return JSONResponse(
        error_body("unavailable", "the ledger database is unreachable; retry later"),
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


async def archived_handler(_request: Request, error: Exception) -> JSONResponse:
    """New work for an archived (or deleted) session, from any route: 409, and nothing was
    written."""
    kind = "session_deleted" if isinstance(error, SessionDeleted) else "session_archived"
    return JSONResponse(error_body(kind, str(error)), status_code=409)


# The services' domain errors and the answer each gets, whatever route it comes from (the
# most specific class registered wins): the message is the error's own.
DOMAIN_ERRORS: dict[type[Exception], tuple[int, str]] = {
    NotFound: (404, "not_found"),
    LabelTaken: (409, "conflict"),
    NotWaiting: (409, "conflict"),
    NotForkable: (409, "not_forkable"),
    TurnRunning: (409, "turn_running"),
    NotInChain: (409, "not_in_chain"),
    NotAWorker: (409, "not_a_worker"),
    InvalidAfter: (400, "invalid_after"),
    InvalidLabel: (422, "invalid_request"),
    ModelConfigError: (422, "invalid_model_config"),
}


async def domain_error_handler(_request: Request, error: Exception) -> JSONResponse:
    """A service's refusal in the one error shape, with the status its kind has."""
    for kind in type(error).__mro__:
        if kind in DOMAIN_ERRORS:
            status, name = DOMAIN_ERRORS[kind]
            return JSONResponse(error_body(name, str(error)), status_code=status)
    raise error  # registered for a class of the table only
