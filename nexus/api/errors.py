"""One error shape for every /v1 answer: {"error": {"type", "message"}}."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from nexus.adapters.inbound.base import Rejected


class ApiError(Exception):
    """An error the API answers with its own status and a message a caller can act on."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


def error_body(kind: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"type": kind, "message": message}}


async def api_error_handler(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return JSONResponse(error_body(error.kind, error.message), status_code=error.status)


async def rejected_handler(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, Rejected)
    kind = "invalid_signature" if error.status == 401 else "malformed_request"
    return JSONResponse(error_body(kind, error.reason), status_code=error.status)
