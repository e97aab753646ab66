"""A reply's file on iMessage: downloaded (checked and pinned, like http_fetch) and uploaded
to the chat. Traffic goes to loopback only: a file server and the fake BlueBubbles server,
loopback allowed for the download where a test says so."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from nexus.adapters.outbound.bluebubbles import BlueBubblesClient, BlueBubblesSender
from nexus.adapters.pinned_fetch import PinnedDownloads
from nexus.engine.addresses import network_permissions
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, RetryLater, Sent
from tests.fakes.bluebubbles_server import FakeBlueBubbles
from tests.fakes.url_files import FileServer

PASSWORD = "bb-password"
CHAT = "iMessage;-;+15559876543"
JPEG = b"\xff\xd8\xff\xe0" + b"\x10JFIF" + bytes(range(256)) * 4
LOOPBACK = network_permissions({"allow": ["127.0.0.1"]})


@pytest.fixture
def fake() -> Iterator[FakeBlueBubbles]:
    with FakeBlueBubbles(PASSWORD) as server:
        yield server


@pytest.fixture
def files() -> Iterator[FileServer]:
    with FileServer({"/menu.jpg": (JPEG, "image/jpeg")}) as server:
        yield server


def _sender(
    fake: FakeBlueBubbles, *, allow: bool = True, max_bytes: int = 1_000_000
) -> BlueBubblesSender:
    downloads = PinnedDownloads(
        max_bytes=max_bytes, timeout_s=5.0, network=LOOPBACK if allow else None
    )
    return BlueBubblesSender(BlueBubblesClient(fake.url, PASSWORD), downloads)


def _delivery(file: dict[str, Any]) -> DeliveryRecord:
    return DeliveryRecord(
        id="dlv_file",
        turn_id="t",
        chunk_index=1,
        session_id="s",
        event_id="reply:t",
        platform="bluebubbles",
        target={"chat_guid": CHAT, "file": file},
        text=f"[image] {file.get('url')}",
        status=DeliveryStatus.PENDING,
        attempts=0,
        idempotency_key="t:1",
        provider_message_id=None,
        error=None,
        next_attempt_at=None,
        created_at=0,
        updated_at=0,
    )


def test_an_image_is_downloaded_and_uploaded_to_its_chat_once(
    fake: FakeBlueBubbles, files: FileServer
) -> None:
    file = {"url": files.url("/menu.jpg"), "name": "menu.jpg", "mime_type": None}
    result = _sender(fake).send(_delivery(file))
    assert isinstance(result, Sent)
    [upload] = fake.of("attachment")
    assert upload.body["chatGuid"] == CHAT and upload.body["tempGuid"] == "dlv_file"
    assert upload.files == {"attachment": ("menu.jpg", JPEG, "image/jpeg")}
    assert fake.texts() == []
    [hit] = files.hits
    assert hit["path"] == "/menu.jpg" and hit["host"] == f"127.0.0.1:{files.port}"


def test_a_loopback_url_not_allowed_is_refused_without_any_connection(
    fake: FakeBlueBubbles, files: FileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sender = _sender(fake, allow=False)
    attempts: list[Any] = []

    def create_connection(address: Any, *_: Any, **__: Any) -> socket.socket:
        attempts.append(address)
        raise ConnectionRefusedError("recorded, not connected")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    for url in (files.url("/menu.jpg"), "http://10.0.0.7/x.jpg", "http://169.254.169.254/"):
        result = sender.send(_delivery({"url": url, "name": "x.jpg"}))
        assert isinstance(result, Refused), url
        assert result.error.startswith("the attachment was not fetched: "), result
    assert attempts == [] and files.hits == []
    assert fake.of("attachment") == []


def test_a_file_too_large_or_missing_is_refused_a_busy_server_retried(
    fake: FakeBlueBubbles, files: FileServer
) -> None:
    big = _sender(fake, max_bytes=100).send(_delivery({"url": files.url("/menu.jpg"), "name": "m"}))
    assert isinstance(big, Refused) and "NEXUS_ATTACHMENT_MAX_BYTES (100 bytes)" in big.error
    gone = _sender(fake).send(_delivery({"url": files.url("/gone.jpg"), "name": "g"}))
    assert isinstance(gone, Refused) and "HTTP 404" in gone.error
    files.status["/menu.jpg"] = 503
    busy = _sender(fake).send(_delivery({"url": files.url("/menu.jpg"), "name": "m"}))
    assert isinstance(busy, RetryLater) and "HTTP 503" in busy.error
    assert fake.of("attachment") == []


def test_a_file_without_a_url_or_a_downloader_is_refused(fake: FakeBlueBubbles) -> None:
    assert _sender(fake).send(_delivery({"name": "x"})) == Refused(
        "the attachment needs a url and a name"
    )
    plain = BlueBubblesSender(BlueBubblesClient(fake.url, PASSWORD))
    refused = plain.send(_delivery({"url": "https://example.com/a.jpg", "name": "a.jpg"}))
    assert isinstance(refused, Refused) and "not downloaded" in refused.error
