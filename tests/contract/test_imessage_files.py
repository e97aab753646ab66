"""A rich reply's attachments on iMessage, on both databases: the answer goes as text,
then each file as a delivery of its own, downloaded and uploaded to the chat through the
loopback fake BlueBubbles server. A file the worker may not fetch fails alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from nexus.adapters.outbound.bluebubbles import BlueBubblesClient, BlueBubblesSender
from nexus.adapters.pinned_fetch import PinnedDownloads
from nexus.adapters.scripted import CallTools, Say
from nexus.db import Database
from nexus.engine.addresses import NetworkPermissions, network_permissions
from nexus.event import Container
from nexus.ledger.enums import DeliveryStatus
from nexus.outbound.rate_limit import InProcessRateLimiter
from nexus.outbound.service import DeliveryService
from tests.contract.outbound_support import OutboundRig, message, outbound_rig
from tests.fakes.bluebubbles_server import FakeBlueBubbles
from tests.fakes.platform_server import FakePlatforms
from tests.fakes.url_files import FileServer
from tests.support import FakeClock

PASSWORD = "bb-password"
CHAT = "iMessage;-;+15559876543"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))


@pytest.fixture
def bluebubbles() -> Iterator[FakeBlueBubbles]:
    with FakeBlueBubbles(PASSWORD) as server:
        yield server


@pytest.fixture
def files() -> Iterator[FileServer]:
    with FileServer({"/chart.png": (PNG, "image/png")}) as server:
        yield server


@contextmanager
def _rig(
    database: Database,
    clock: FakeClock,
    bluebubbles: FakeBlueBubbles,
    network: NetworkPermissions | None,
) -> Iterator[OutboundRig]:
    with FakePlatforms() as platforms:
        rig = outbound_rig(database, clock, platforms)
        downloads = PinnedDownloads(max_bytes=1_000_000, timeout_s=5.0, network=network)
        sender = BlueBubblesSender(BlueBubblesClient(bluebubbles.url, PASSWORD), downloads)
        rig.service = DeliveryService(
            database=database,
            senders={"bluebubbles": sender},
            limiter=InProcessRateLimiter(burst=1_000),
            doorbell=rig.doorbell,
            lease_ms=30_000,
            uncertain="fail",
            sleep=rig.sleeps.append,
        )
        yield rig


def _answer(rig: OutboundRig, url: str) -> str:
    event = message(
        "bluebubbles:in1",
        "bluebubbles",
        "+15559876543",
        "the chart?",
        container=Container(kind="dm", id=CHAT),
        message_id="MSG-1",
    ).model_copy(update={"platform": "imessage"})
    rig.arrive(event)
    session = rig.rig.session("dm:mom", persona="assistant", capabilities=("rich_replies",))
    chart = {"url": url, "kind": "image", "name": "chart.png"}
    rig.rig.model.push(CallTools((("present_options", {"attachments": [chart]}),)), Say("Here."))
    outcome = rig.rig.say(session.id, event.text or "", event_id=event.id)
    assert outcome.status == "committed", outcome
    return outcome.turn_id


def test_an_image_follows_the_text_as_an_upload_to_the_chat(
    database: Database, clock: FakeClock, bluebubbles: FakeBlueBubbles, files: FileServer
) -> None:
    allowed = network_permissions({"allow": ["127.0.0.1"]})  # the test's loopback server
    with _rig(database, clock, bluebubbles, allowed) as rig:
        turn_id = _answer(rig, files.url("/chart.png"))
        assert rig.pump() == ["sent", "sent"]
        assert bluebubbles.texts(CHAT) == ["Here."]  # no `chart.png: url` line
        [upload] = bluebubbles.of("attachment")
        assert upload.body["chatGuid"] == CHAT
        assert upload.files == {"attachment": ("chart.png", PNG, "image/png")}
        text, file = rig.deliveries(turn_id)
        assert file.target["file"]["url"] == files.url("/chart.png")
        assert (file.status, upload.body["tempGuid"]) == (DeliveryStatus.SENT, file.id)
        assert text.status == DeliveryStatus.SENT
    assert len(files.hits) == 1


def test_a_loopback_file_not_allowed_fails_alone_and_the_text_goes(
    database: Database, clock: FakeClock, bluebubbles: FakeBlueBubbles, files: FileServer
) -> None:
    with _rig(database, clock, bluebubbles, None) as rig:
        turn_id = _answer(rig, files.url("/chart.png"))
        assert rig.pump() == ["sent", "failed"]
        assert bluebubbles.texts(CHAT) == ["Here."]
        text, file = rig.deliveries(turn_id)
        assert text.status == DeliveryStatus.SENT and file.status == DeliveryStatus.FAILED
        assert "loopback" in (file.error or "") and "not fetched" in (file.error or "")
    assert files.hits == [] and bluebubbles.of("attachment") == []
