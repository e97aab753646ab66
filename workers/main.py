"""The worker's entry module (`celery -A workers.main worker`): settings are read here."""

from __future__ import annotations

from typing import Any

from celery.signals import setup_logging

from nexus.logs import configure_logging
from nexus.settings import get_settings
from workers.app import create_celery
from workers.runtime import WorkerRuntime

app = create_celery(get_settings())
runtime = WorkerRuntime(app, get_settings())


@setup_logging.connect
def _logging(**_: Any) -> None:
    # Connected, this signal stops Celery from setting up logging its own way: its records
    # go through Nexus's processors (JSON, secrets redacted) like everything else.
    configure_logging(get_settings())
