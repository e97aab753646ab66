"""The beat process (`celery -A beat.main beat`): one per deployment; ticks are idempotent,
so a second one by mistake changes nothing (the watermark serialises them)."""

from __future__ import annotations

from typing import Any

from celery.signals import setup_logging

from beat.schedule import SCHEDULE
from nexus.bootstrap import bootstrap
from nexus.logs import configure_logging
from nexus.settings import get_settings

# Beat only publishes the tick on a schedule: of its graph it uses the broker's app alone.
app = bootstrap(get_settings()).celery
app.conf.beat_schedule = SCHEDULE


@setup_logging.connect
def _logging(**_: Any) -> None:
    # Beat's records go through Nexus's processors too (JSON, secrets redacted).
    configure_logging(get_settings())
