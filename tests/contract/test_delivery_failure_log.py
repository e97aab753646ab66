"""A chunk the platform refuses for good is logged at WARNING with the platform's answer
(its status and a bounded excerpt of its body), and no secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from nexus.db import Database
from nexus.logs import configure_logging
from nexus.settings import Settings
from tests.contract.outbound_support import OutboundRig, message, outbound_rig, platform_settings
from tests.fakes.platform_server import FakePlatforms
from tests.support import FakeClock

BOT_TOKEN = "123:canary-4d1c77e0"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


@pytest.fixture
def fake() -> Iterator[FakePlatforms]:
    with FakePlatforms() as platforms:
        yield platforms


def _logged(
    database: Database, clock: FakeClock, fake: FakePlatforms, status: int, body: dict[str, object]
) -> tuple[OutboundRig, list[dict[str, object]]]:
    stream = io.StringIO()
    settings: Settings = platform_settings(fake, telegram_bot_token=BOT_TOKEN)
    configure_logging(settings, stream=stream)
    rig = outbound_rig(database, clock, fake, telegram_bot_token=BOT_TOKEN)
    event = message("telegram:1", "telegram", "4242", "hi", message_id="77")
    rig.arrive(event)
    rig.answer(rig.rig.session("dm:ent_tg"), event, "hello")
    fake.fail_next("telegram", status, body)
    rig.pump()
    return rig, [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_refused_chunk_is_a_warning_with_the_platforms_status_and_reason(
    database: Database, clock: FakeClock, fake: FakePlatforms
) -> None:
    answer = {
        "ok": False,
        "error_code": 403,
        "description": "Forbidden: bot was blocked by the user",
    }
    _, lines = _logged(database, clock, fake, 403, answer)
    [refused] = [line for line in lines if line["event"] == "delivery_failed"]
    assert refused["level"] == "warning"
    assert refused["platform"] == "telegram"
    assert refused["status"] == 403
    assert "bot was blocked by the user" in str(refused["error"])
    assert refused["reason"] == "refused"


def test_the_logged_answer_is_bounded_and_carries_no_bot_token(
    database: Database, clock: FakeClock, fake: FakePlatforms
) -> None:
    # A proxy that echoes the request's URL, token and all, then pages of HTML.
    echoed = f"no route for POST /bot{BOT_TOKEN}/sendMessage " + "<p>lorem ipsum</p>" * 500
    _, lines = _logged(database, clock, fake, 404, {"description": echoed})
    [refused] = [line for line in lines if line["event"] == "delivery_failed"]
    assert refused["status"] == 404
    assert "no route for POST" in str(refused["error"])
    assert len(str(refused["error"])) <= 500
    whole = json.dumps(lines)
    assert BOT_TOKEN not in whole and BOT_TOKEN.split(":")[1] not in whole


def test_the_stored_error_carries_no_bot_token_either(
    database: Database, clock: FakeClock, fake: FakePlatforms
) -> None:
    echoed = f"no route for POST /bot{BOT_TOKEN}/sendMessage"
    _logged(database, clock, fake, 404, {"description": echoed})
    with database.engine.connect() as connection:
        stored = [row[0] for row in connection.exec_driver_sql("SELECT error FROM deliveries")]
    assert any("no route for POST /bot[redacted]/sendMessage" in (e or "") for e in stored)
    assert not any(BOT_TOKEN.split(":")[1] in (e or "") for e in stored)
