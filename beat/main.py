"""The beat process (`celery -A beat.main beat`): one per deployment; ticks are idempotent,
so a second one by mistake changes nothing (the watermark serialises them)."""

from __future__ import annotations

from beat.schedule import SCHEDULE
from nexus.settings import get_settings
from workers.app import create_celery

app = create_celery(get_settings())
app.conf.beat_schedule = SCHEDULE
