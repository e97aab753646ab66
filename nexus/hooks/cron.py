"""Cron and the timer's minutes: pure "what is due" functions (arq's approach)."""

from __future__ import annotations

from datetime import UTC, datetime

from croniter import croniter

MINUTE_MS = 60_000
# A beat that was down longer than this does not replay every missed minute on return:
# the newest ones are ticked, older ones are skipped (and the skip is logged).
MAX_CATCH_UP_MINUTES = 60


def floor_minute(now_ms: int) -> int:
    return now_ms - now_ms % MINUTE_MS


def minutes_to_tick(last_minute_ms: int | None, now_ms: int) -> tuple[list[int], int]:
    """Minutes in (last, now] to tick, oldest first, and how many were skipped.

    The first tick ever starts with the current minute.
    """
    current = floor_minute(now_ms)
    if last_minute_ms is None:
        return [current], 0
    due = list(range(last_minute_ms + MINUTE_MS, current + 1, MINUTE_MS))
    skipped = max(0, len(due) - MAX_CATCH_UP_MINUTES)
    return due[skipped:], skipped


def cron_matches(expression: str, minute_ms: int) -> bool:
    """Does the cron expression (UTC) select this minute?"""
    moment = datetime.fromtimestamp(minute_ms / 1000, UTC)
    return bool(croniter.match(expression, moment))


def valid_cron(expression: str) -> bool:
    return bool(croniter.is_valid(expression))
