"""`nexus dev` greets with one banner, then only warnings and the turns it answers;
`--verbose` brings back the migrations, the broker and every task."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.integration.test_dev_mode import NEXUS, _clean_environment, _nexus, _running
from tests.support import free_port

pytestmark = pytest.mark.slow


def _answered_once(tmp_path: Path, *flags: str) -> str:
    """What `nexus dev` printed from its start through one answered turn, which a message
    sent with X-Request-ID: follow-me led to."""
    port = free_port()
    environment = _clean_environment(port)
    command = [str(NEXUS), "dev", "--port", str(port), *flags]
    with _running(command, tmp_path, environment) as log:
        answer = _nexus(tmp_path, environment, "send", "main", "hello", "--wait")
        assert "You said: hello" in answer
        sent = httpx.post(
            f"http://127.0.0.1:{port}/v1/sessions/main/messages",
            json={"content": "again"},
            headers={"X-Request-ID": "follow-me"},
        )
        assert sent.status_code == 202, sent.text
        assert sent.headers["X-Request-ID"] == "follow-me"
        deadline = time.monotonic() + 30
        while "request_id=follow-me" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        return log.read_text(errors="replace")


def test_a_quiet_start_shows_the_banner_and_the_turn_only(tmp_path: Path) -> None:
    shown = _answered_once(tmp_path)
    assert shown.count("is running at") == 1
    assert "/ui" in shown and "ledger sqlite" in shown and "model scripted" in shown
    assert "alembic" not in shown and "Running upgrade" not in shown
    assert "No hostname was supplied" not in shown
    assert "Task nexus." not in shown and "received" not in shown
    # The turn the request led to logs the request's id (API -> task header -> worker).
    turns = [line for line in shown.splitlines() if "turn_committed" in line]
    assert len(turns) == 2 and "request_id=follow-me" in turns[1]
    assert all("[info" not in line or "turn_committed" in line for line in shown.splitlines())


def test_verbose_brings_the_detail_back(tmp_path: Path) -> None:
    shown = _answered_once(tmp_path, "--verbose")
    assert "is running at" in shown
    assert "alembic" in shown
    assert "No hostname was supplied" in shown
    assert "Task nexus.session.run" in shown and "succeeded" in shown
