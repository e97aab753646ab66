"""Nexus's own processes for tests (`nexus api`, `nexus worker`, a beat), and the Telegram
updates a platform would post to them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.integration.worker_process import ROOT, stop

NEXUS = Path(sys.prefix) / "bin" / "nexus"


@contextmanager
def nexus_process(
    args: list[str], log: Path, environment: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """`nexus ARGS` with its output in `log`; terminated (then killed) when the block ends."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(NEXUS), *args], env=environment, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            yield process
        finally:
            stop(process, timeout=30)


@contextmanager
def fast_beat(
    environment: dict[str, str], log: Path, *, tick_seconds: float = 1.0
) -> Iterator[subprocess.Popen[bytes]]:
    """Celery beat with the real schedule but a short tick, so the timer and the relay run
    within a test's time. Each beat keeps its own schedule file beside its log."""
    schedule = log.with_suffix(".schedule")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.integration.fast_beat", "beat",
             "--schedule", str(schedule), "--loglevel", "INFO"],
            cwd=ROOT,
            env={**os.environ, **environment, "NEXUS_TEST_TICK_SECONDS": str(tick_seconds)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            yield process
        finally:
            stop(process)


def telegram_update(number: int, sender: int, text: str | None = None) -> dict[str, object]:
    """A private-chat Telegram update from `sender`, update_id 900000 + `number`."""
    user = {"id": 7000 + sender, "is_bot": False, "first_name": f"Person {sender}"}
    return {
        "update_id": 900_000 + number,
        "message": {
            "message_id": number,
            "from": user,
            "chat": {"id": 7000 + sender, "type": "private", "first_name": user["first_name"]},
            "date": 1_767_225_600 + number,
            "text": text if text is not None else f"message {number} from {sender}",
        },
    }
