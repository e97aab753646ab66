"""The beat schedule, as data: the timer ticks every 60 seconds."""

from __future__ import annotations

from typing import Any

TICK_SECONDS = 60.0

SCHEDULE: dict[str, dict[str, Any]] = {
    "timer-tick": {
        "task": "nexus.timer.tick",
        "schedule": TICK_SECONDS,
        # A tick that waited longer than its period is stale: the next one covers it
        # (the watermark makes every missed minute fire anyway).
        "options": {"expires": TICK_SECONDS},
    },
}
