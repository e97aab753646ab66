"""The FastAPI application factory: nothing is built until it is called."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from nexus import __version__
from nexus.adapters.inbound.base import Rejected
from nexus.adapters.inbound.registry import build_adapters
from nexus.api import inbound
from nexus.api.errors import ApiError, api_error_handler, error_body, rejected_handler
from nexus.api.state import AppState
from nexus.db import Database
from nexus.ids import Clock, now_ms
from nexus.ingest.doorbell import Doorbell
from nexus.settings import Settings


async def _validation_handler(_request: object, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    return JSONResponse(error_body("invalid_request", str(error.errors())), status_code=422)


def create_app(
    settings: Settings, database: Database, doorbell: Doorbell, *, clock: Clock = now_ms
) -> FastAPI:
    """An app bound to one database and doorbell (the entry point chooses both)."""
    app = FastAPI(title="Nexus", version=__version__, docs_url="/docs")
    app.state.nexus = AppState(
        settings=settings,
        database=database,
        adapters=build_adapters(settings),
        doorbell=doorbell,
        clock=clock,
    )
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(Rejected, rejected_handler)
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.include_router(inbound.router)

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
