"""The worker's entry module (`celery -A workers.main worker`): settings are read here."""

from __future__ import annotations

from nexus.settings import get_settings
from workers.app import create_celery
from workers.runtime import WorkerRuntime

app = create_celery(get_settings())
runtime = WorkerRuntime(app, get_settings())
