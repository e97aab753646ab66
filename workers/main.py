"""The worker's entry module (`celery -A workers.main worker`): settings are read here."""

from __future__ import annotations

from typing import Any

from celery.signals import setup_logging

from nexus.bootstrap import bootstrap_worker
from nexus.logs import configure_logging
from nexus.settings import get_settings

# The graph is built here but connects to nothing until used; each forked child replaces
# it with a fresh one (workers/tasks.py), so no socket crosses a fork.
app = bootstrap_worker(get_settings()).celery


@setup_logging.connect
def _logging(**_: Any) -> None:
    # Connected, this signal stops Celery from setting up logging its own way: its records
    # go through Nexus's processors (JSON, secrets redacted) like everything else.
    configure_logging(get_settings())
