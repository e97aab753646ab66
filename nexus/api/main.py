"""The API process's app, built from the settings when uvicorn asks (`--factory`)."""

from __future__ import annotations

from fastapi import FastAPI

from nexus.api.app import create_app
from nexus.db import Database
from nexus.logs import configure_logging
from nexus.settings import get_settings


def build() -> FastAPI:
    from workers.doorbell import doorbell_for

    settings = get_settings()
    configure_logging(settings)
    database = Database(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
    )
    return create_app(settings, database, doorbell_for(settings))
