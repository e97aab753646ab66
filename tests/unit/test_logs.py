"""Log lines are JSON, carry no secret, and user text cannot forge a line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from nexus.logs import REDACTED, configure_logging, secret_values
from nexus.settings import Settings

CANARY = "canary-7f3a9e1b"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """These tests configure the process's logging; the rest of the suite gets it back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _settings() -> Settings:
    return Settings(
        database_url=f"postgresql://nexus:{CANARY}-db@db/nexus",
        redis_url=f"redis://:{CANARY}-redis@redis:6379/0",
        api_tokens=f"first-{CANARY},second-{CANARY}",
        telegram_bot_token=f"123:{CANARY}",
        slack_signing_secret=f"{CANARY}-slack",
        flower_basic_auth=f"admin:{CANARY}-flower",
        bluebubbles_password=f"{CANARY} p@ss/word",
    )


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    raw = stream.getvalue().splitlines()
    return [json.loads(line) for line in raw]


def test_every_secret_setting_is_known_to_the_redactor() -> None:
    secrets = secret_values(_settings())
    for expected in (f"{CANARY}-db", f"{CANARY}-redis", f"second-{CANARY}", f"123:{CANARY}",
                     f"{CANARY}-slack", f"{CANARY}-flower"):  # fmt: skip
        assert expected in secrets


def test_no_secret_reaches_a_log_line_from_structlog_or_the_standard_library() -> None:
    stream = io.StringIO()
    settings = _settings()
    configure_logging(settings, stream=stream)
    log = structlog.get_logger("test")
    log.info("calling the platform", url=f"https://api.telegram.org/bot123:{CANARY}/send")
    log.info("token presented", authorization=f"Bearer first-{CANARY}", input_tokens=12)
    logging.getLogger("celery").warning("broker at %s", settings.redis_url)
    logging.getLogger("sqlalchemy").error("connect failed: %s", settings.database_url)
    lines = _lines(stream)
    assert len(lines) == 4
    assert CANARY not in stream.getvalue()
    assert lines[1]["authorization"] == REDACTED and lines[1]["input_tokens"] == 12
    assert REDACTED in str(lines[0]["url"]) and lines[2]["logger"] == "celery"


def test_a_password_sent_in_a_query_string_is_redacted_url_encoded_too() -> None:
    stream = io.StringIO()
    configure_logging(_settings(), stream=stream)
    access = logging.getLogger("uvicorn.access")
    # A uvicorn run by an earlier test in this process leaves its loggers set its way
    # (a level of its own, say): as a fresh process has them.
    for name in ("uvicorn", "uvicorn.access"):
        left = logging.getLogger(name)
        left.disabled, left.propagate = False, True
        left.handlers.clear()
        left.setLevel(logging.NOTSET)
    access.info(
        '"%s %s HTTP/1.1" %d',
        "POST",
        f"/v1/inbound/bluebubbles?password={CANARY}+p%40ss%2Fword",
        200,
    )
    structlog.get_logger("test").info(
        "sent", url=f"http://mac:1234/api?password={CANARY}%20p%40ss%2Fword"
    )
    assert CANARY not in stream.getvalue()
    assert stream.getvalue().count(REDACTED) == 2


def test_user_text_cannot_forge_a_log_line() -> None:
    stream = io.StringIO()
    configure_logging(Settings(), stream=stream)
    forged = 'hello\n{"event": "admin_login", "level": "info"}\r\nbye'
    structlog.get_logger("test").info("message_received", text=forged)
    logging.getLogger("nexus.tests.stdlib").warning("path %s", "/v1/x\ninjected")
    lines = _lines(stream)
    assert len(lines) == 2  # each record one line, whatever the text held
    assert lines[0]["text"] == forged.replace("\r", "\\r").replace("\n", "\\n")
    assert "\\n" in str(lines[1]["event"])
