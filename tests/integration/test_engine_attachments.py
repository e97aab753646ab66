"""Inbound images reach the Messages API: by URL, or fetched with the platform's token at
turn time, through the real anthropic SDK and a fake API; the token never reaches the ledger."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from nexus.adapters.platform_files import PlatformFiles
from nexus.db import Database
from nexus.ledger.enums import MessageRole
from nexus.ledger.models import Message, table_of
from tests.contract.engine_support import RecordingTool, Rig, build_rig, on_anthropic
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.file_server import TELEGRAM_TOKEN, FakeFiles
from tests.support import FakeClock

MODEL = "claude-sonnet-4-6"
JPEG = b"\xff\xd8\xff\xe0" + b"\x10JFIF" + b"\x00" * 40
CHART = {
    "kind": "image",
    "file_id": "77",
    "url": "https://cdn.discordapp.com/attachments/1/77/chart.png",
    "name": "chart.png",
    "mime_type": "image/png",
}
PHOTO = {"kind": "image", "file_id": "AgACAgI", "mime_type": "image/jpeg", "size": len(JPEG)}


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def files() -> Iterator[FakeFiles]:
    with FakeFiles() as server:
        server.add("AgACAgI", JPEG, "image/jpeg")
        yield server


def _rig(database: Database, clock: FakeClock, fake: FakeAnthropicServer, files: FakeFiles) -> Rig:
    rig = on_anthropic(
        build_rig(database, clock, tools=[RecordingTool("look", answer="ok")], granted=["look"]),
        fake.base_url,
        MODEL,
    )
    rig.turns.attachments = PlatformFiles(
        max_bytes=100_000,
        timeout_s=5.0,
        telegram_token=TELEGRAM_TOKEN,
        telegram_api_base=files.base_url,
    )
    return rig


def _stored_messages(database: Database) -> str:
    with database.unit_of_work() as uow:
        rows = uow.connection.execute(select(table_of(Message).c.content)).scalars().all()
    return json.dumps(list(rows))


def _plain(blocks: list[dict[str, object]]) -> list[dict[str, object]]:
    """The blocks without the prompt-cache breakpoint the adapter puts on the last one."""
    return [{k: v for k, v in block.items() if k != "cache_control"} for block in blocks]


def test_a_public_url_goes_as_is_and_a_telegram_photo_is_fetched_for_the_request(
    database: Database, clock: FakeClock, fake: FakeAnthropicServer, files: FakeFiles
) -> None:
    rig = _rig(database, clock, fake, files)
    session = rig.session(capabilities=["test_tools"])
    fake.reply_tool_use("look", {})
    fake.reply_text("A chart and a photo.")
    outcome = rig.say(session.id, "", platform="telegram", attachments=(CHART, PHOTO))
    assert outcome.status == "committed"
    first, second = (request.body["messages"] for request in fake.requests)
    shown = [b for b in _plain(first[0]["content"]) if b["type"] in ("image", "document")]
    assert shown == [
        {"type": "image", "source": {"type": "url", "url": CHART["url"]}},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/jpeg",
                "data": base64.b64encode(JPEG).decode(),
            },
        },
    ]
    # The tool round sees them again.
    assert _plain(second[0]["content"]) == _plain(first[0]["content"])
    assert len(files.seen) == 2  # getFile and the download: once for the turn's two calls
    # The ledger keeps the metadata, neither the bytes nor the token in the file URL.
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None and view.messages[0].role == MessageRole.USER
    assert view.messages[0].content["attachments"] == [CHART, PHOTO]
    stored = _stored_messages(database)
    assert TELEGRAM_TOKEN not in stored and base64.b64encode(JPEG).decode() not in stored


def test_a_photo_that_cannot_be_fetched_is_described_and_the_turn_still_runs(
    database: Database, clock: FakeClock, fake: FakeAnthropicServer, files: FakeFiles
) -> None:
    rig = _rig(database, clock, fake, files)
    session = rig.session()
    fake.reply_text("I cannot see it.")
    gone = {**PHOTO, "file_id": "expired"}
    outcome = rig.say(session.id, "and this?", platform="telegram", attachments=(gone,))
    assert outcome.status == "committed"
    content = fake.requests[0].body["messages"][0]["content"]
    assert [b["text"] for b in content[1:]] == [
        "and this?",
        "[attachment] image, image/jpeg, 49 bytes",
        "(the image is not shown: the platform refused the lookup (HTTP 400))",
    ]
