"""The BlueBubbles REST client and the inbound file fetch, over real HTTP to a loopback fake
BlueBubbles server: texts, files, tapbacks, typing, downloads; the password never shown."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from nexus.adapters.outbound.bluebubbles import BlueBubblesClient, tapback
from nexus.adapters.platform_files import PlatformFiles
from nexus.engine.attachments import AttachmentUnavailable, Fetched
from nexus.outbound.ports import Refused, RetryLater, Sent
from tests.fakes.bluebubbles_server import FakeBlueBubbles

# Characters a URL must encode: the password travels as a query parameter.
PASSWORD = "p@ss w/rd&=1"
CHAT = "iMessage;-;+15559876543"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 60


@pytest.fixture
def fake() -> Iterator[FakeBlueBubbles]:
    with FakeBlueBubbles(PASSWORD) as server:
        yield server


def _client(fake: FakeBlueBubbles, password: str | None = PASSWORD) -> BlueBubblesClient:
    return BlueBubblesClient(fake.url + "/", password)


def test_a_text_goes_to_its_chat_with_the_password_and_its_temp_guid(
    fake: FakeBlueBubbles,
) -> None:
    result = _client(fake).send_text(CHAT, "Hello Mom", temp_guid="dlv_1")
    assert result == Sent("FAKE-0001")
    [call] = fake.of("text")
    assert call.query == {"password": PASSWORD}
    assert call.body == {
        "chatGuid": CHAT,
        "tempGuid": "dlv_1",
        "message": "Hello Mom",
        "method": "apple-script",
    }
    assert fake.texts(CHAT) == ["Hello Mom"]


def test_a_file_goes_as_multipart(fake: FakeBlueBubbles) -> None:
    client = BlueBubblesClient(fake.url, PASSWORD, method="private-api")
    assert isinstance(client.send_attachment(CHAT, "menu.jpg", JPEG, "image/jpeg", "t1"), Sent)
    [call] = fake.of("attachment")
    assert call.body == {
        "chatGuid": CHAT,
        "tempGuid": "t1",
        "name": "menu.jpg",
        "method": "private-api",
    }
    assert call.files == {"attachment": ("menu.jpg", JPEG, "image/jpeg")}


def test_tapbacks_and_typing(fake: FakeBlueBubbles) -> None:
    client = _client(fake)
    assert isinstance(client.react(CHAT, "MSG-1", "love"), Sent)
    assert fake.of("react")[0].body == {
        "chatGuid": CHAT,
        "selectedMessageGuid": "MSG-1",
        "reaction": "love",
    }
    with pytest.raises(ValueError, match="not a tapback"):
        tapback("heart")
    assert tapback("-laugh") == "-laugh"
    assert isinstance(client.typing(CHAT, on=True), Sent)
    assert isinstance(client.typing(CHAT, on=False), Sent)
    # The chat GUID's `;` and `+` are encoded in the path, and come back whole.
    assert [(c.method, c.chat) for c in fake.of("typing")] == [("POST", CHAT), ("DELETE", CHAT)]


def test_a_wrong_password_is_refused_and_never_shown(fake: FakeBlueBubbles) -> None:
    result = _client(fake, password="not-it").send_text(CHAT, "hi", temp_guid="t")
    assert isinstance(result, Refused) and "HTTP 401" in result.error
    assert fake.sent == []


def test_an_answer_that_echoes_the_password_is_blanked(fake: FakeBlueBubbles) -> None:
    fake.fail_next("text", 500, f"cannot send for ?password={PASSWORD}")
    result = _client(fake).send_text(CHAT, "hi", temp_guid="t")
    assert isinstance(result, RetryLater)
    assert PASSWORD not in result.error and "[redacted]" in result.error


def test_unreachable_or_unconfigured_says_so(fake: FakeBlueBubbles) -> None:
    assert _client(fake, password=None).send_text(CHAT, "hi", "t") == Refused(
        "NEXUS_BLUEBUBBLES_PASSWORD is not set"
    )
    assert BlueBubblesClient(None, PASSWORD).send_text(CHAT, "hi", "t") == Refused(
        "NEXUS_BLUEBUBBLES_URL is not set"
    )
    closed = BlueBubblesClient("http://127.0.0.1:9", PASSWORD).send_text(CHAT, "hi", "t")
    assert isinstance(closed, RetryLater) and PASSWORD not in closed.error


def test_a_repeat_of_a_send_still_under_way_is_not_sent_twice(fake: FakeBlueBubbles) -> None:
    """The first call is held by the server (still sending); a retry under the same
    tempGuid is refused there as already queued, which is the first one's success."""
    fake.hold_next("text")
    first = threading.Thread(target=_client(fake).send_text, args=(CHAT, "once", "dlv_9"))
    first.start()
    assert fake.held.wait(timeout=10)
    assert _client(fake).send_text(CHAT, "once", temp_guid="dlv_9") == Sent(None)
    fake.release()
    first.join(timeout=10)
    assert fake.texts() == ["once"]


def _files(fake: FakeBlueBubbles, password: str | None = PASSWORD, **more: object) -> PlatformFiles:
    return PlatformFiles(
        max_bytes=1024,
        timeout_s=2.0,
        bluebubbles_url=fake.url,
        bluebubbles_password=password,
        **more,  # type: ignore[arg-type]
    )


def test_an_imessage_attachment_is_downloaded_with_the_password(fake: FakeBlueBubbles) -> None:
    guid = "at_0_A41B7C2D-0E3F-4A5B-8C6D-7E8F9A0B1C2D"
    fake.files[guid] = (JPEG, "image/jpeg")
    fetched = _files(fake).fetch("imessage", {"file_id": guid, "mime_type": "image/jpeg"})
    assert fetched == Fetched(JPEG, "image/jpeg")
    [call] = fake.of("download")
    assert call.body["guid"] == guid and call.query == {"password": PASSWORD}


def test_an_imessage_attachment_that_cannot_be_had_says_why_without_the_password(
    fake: FakeBlueBubbles,
) -> None:
    fake.files["big"] = (b"x" * 2048, "image/jpeg")
    cases: list[tuple[PlatformFiles, dict[str, object], str]] = [
        (_files(fake), {"file_id": "big"}, "larger than NEXUS_ATTACHMENT_MAX_BYTES"),
        (_files(fake), {"file_id": "huge", "size": 10**9}, "larger than"),  # never fetched
        (_files(fake), {"file_id": "gone"}, r"refused the download \(HTTP 404\)"),
        (_files(fake, password="wrong"), {"file_id": "big"}, r"HTTP 401"),
        (_files(fake, password=None), {"file_id": "big"}, "NEXUS_BLUEBUBBLES_PASSWORD"),
        (_files(fake), {"url": "https://elsewhere.example/x"}, "no BlueBubbles attachment"),
    ]
    for files, item, reason in cases:
        with pytest.raises(AttachmentUnavailable, match=reason) as caught:
            files.fetch("imessage", item)
        assert PASSWORD not in caught.value.reason
    assert "huge" not in [c.body.get("guid") for c in fake.of("download")]
