"""The API process's app, built from the settings when uvicorn asks (`--factory`)."""

from __future__ import annotations

from fastapi import FastAPI

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.logs import configure_logging
from nexus.settings import get_settings


def build() -> FastAPI:
    settings = get_settings()
    configure_logging(settings)
    return create_app(bootstrap(settings))
