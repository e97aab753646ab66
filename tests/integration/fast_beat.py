"""The beat app with its one schedule entry ticking every NEXUS_TEST_TICK_SECONDS (tests
only): the same task, options and watermark, minutes apart in seconds."""

from __future__ import annotations

import os

from beat.main import app
from beat.schedule import SCHEDULE

_TICK = float(os.environ.get("NEXUS_TEST_TICK_SECONDS", "1"))
app.conf.beat_schedule = {
    name: {**entry, "schedule": _TICK, "options": {**entry.get("options", {}), "expires": _TICK}}
    for name, entry in SCHEDULE.items()
}
