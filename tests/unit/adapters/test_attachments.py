"""Inbound attachments on every adapter: the metadata recorded, and its bounds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nexus.adapters.inbound.attachments import attachment, capped
from nexus.adapters.inbound.base import InboundRequest
from nexus.adapters.inbound.bounds import Guarded
from nexus.adapters.inbound.discord import DiscordAdapter
from nexus.adapters.inbound.email import EmailAdapter
from nexus.adapters.inbound.slack import SlackAdapter
from nexus.adapters.inbound.telegram import TelegramAdapter
from nexus.adapters.inbound.twilio import TwilioAdapter
from nexus.adapters.inbound.webhook import StandardWebhookAdapter
from nexus.adapters.inbound.whatsapp import WhatsAppAdapter
from nexus.event import MAX_ATTACHMENTS, NexusEvent

JSON = {"content-type": "application/json"}


def _one(adapter: Any, body: bytes, headers: dict[str, str] | None = None) -> NexusEvent:
    request = InboundRequest("POST", "https://bot.example/in", headers or JSON, body)
    (event,) = Guarded(adapter).parse(request).events
    return event


def _files(event: NexusEvent) -> list[dict[str, Any]]:
    return [a.model_dump(exclude_none=True) for a in event.attachments]


# -- Telegram: Message objects as the Bot API sends them (voice from its docs) ---------------


def _telegram(**media: Any) -> NexusEvent:
    message = {
        "message_id": 1365,
        "date": 1441645532,
        "chat": {"id": 1111111, "type": "private"},
        "from": {"id": 1111111, "first_name": "Test", "is_bot": False},
        **media,
    }
    body = json.dumps({"update_id": 10000, "message": message}).encode()
    return _one(TelegramAdapter("s"), body)


def test_telegram_voice_alone_is_a_message_with_its_duration() -> None:
    event = _telegram(
        voice={
            "file_id": "AwADBAADbXXXXXXXXXXXGBdhD2l6_XX",
            "duration": 5,
            "mime_type": "audio/ogg",
            "file_size": 23000,
        }
    )
    assert event.routable and event.text is None
    assert _files(event) == [
        {
            "kind": "voice",
            "file_id": "AwADBAADbXXXXXXXXXXXGBdhD2l6_XX",
            "mime_type": "audio/ogg",
            "size": 23000,
            "duration": 5,
        }
    ]


def test_telegram_video_document_audio_and_sticker() -> None:
    video = _telegram(
        video={
            "duration": 13,
            "width": 512,
            "height": 640,
            "mime_type": "video/mp4",
            "thumbnail": {"file_id": "thumb", "width": 256, "height": 320},
            "file_id": "BAADAgADpgQAAgX9qEud6QcgPiOAlhYE",
            "file_size": 1381334,
        },
        caption="look",
    )
    assert video.text == "look"
    assert _files(video) == [
        {
            "kind": "video",
            "file_id": "BAADAgADpgQAAgX9qEud6QcgPiOAlhYE",
            "mime_type": "video/mp4",
            "size": 1381334,
            "width": 512,
            "height": 640,
            "duration": 13,
        }
    ]
    document = _telegram(
        document={
            "file_id": "BQACAgI",
            "file_name": "q3.pdf",
            "mime_type": "application/pdf",
            "file_size": 4096,
        }
    )
    assert _files(document) == [
        {
            "kind": "document",
            "file_id": "BQACAgI",
            "name": "q3.pdf",
            "mime_type": "application/pdf",
            "size": 4096,
        }
    ]
    audio = _telegram(audio={"file_id": "CQAC", "duration": 200, "mime_type": "audio/mpeg"})
    assert [(a.kind, a.duration) for a in audio.attachments] == [("audio", 200)]
    sticker = _telegram(
        sticker={"file_id": "CAAC", "width": 512, "height": 512, "emoji": "👍", "type": "regular"}
    )
    assert _files(sticker) == [{"kind": "sticker", "file_id": "CAAC", "width": 512, "height": 512}]


# -- Slack, Discord, WhatsApp, Twilio, email, webhook -----------------------------------------


def test_slack_files_keep_id_private_url_dimensions_and_duration() -> None:
    files = [
        {
            "id": "F2",
            "name": "memo.m4a",
            "mimetype": "audio/mp4",
            "size": 9000,
            "duration_ms": 4600,
            "url_private": "https://files.slack.com/files-pri/T1-F2/memo.m4a",
        }
    ]
    payload = {
        "type": "event_callback",
        "event_id": "Ev9",
        "team_id": "T1",
        "event": {
            "type": "message",
            "subtype": "file_share",
            "user": "U1",
            "text": "",
            "ts": "1.0",
            "channel": "D1",
            "channel_type": "im",
            "files": files,
        },
    }
    event = _one(SlackAdapter("s"), json.dumps(payload).encode())
    assert event.routable and event.text is None
    assert _files(event) == [
        {
            "kind": "audio",
            "file_id": "F2",
            "url": "https://files.slack.com/files-pri/T1-F2/memo.m4a",
            "name": "memo.m4a",
            "mime_type": "audio/mp4",
            "size": 9000,
            "duration": 5,
        }
    ]


def test_discord_message_command_records_the_target_messages_attachments() -> None:
    target = "1098765432109876543"
    image = {
        "id": "77",
        "filename": "chart.png",
        "content_type": "image/png",
        "size": 5120,
        "url": "https://cdn.discordapp.com/attachments/1/77/chart.png",
        "proxy_url": "https://media.discordapp.net/attachments/1/77/chart.png",
        "width": 640,
        "height": 480,
    }
    interaction = {
        "type": 2,
        "id": "786008729715212338",
        "channel_id": "9",
        "user": {"id": "1", "username": "ada"},
        "data": {
            "name": "Describe",
            "type": 3,
            "target_id": target,
            "resolved": {"messages": {target: {"id": target, "attachments": [image]}}},
        },
    }
    event = _one(DiscordAdapter("00" * 32), json.dumps(interaction).encode())
    assert _files(event) == [
        {
            "kind": "image",
            "file_id": "77",
            "url": "https://cdn.discordapp.com/attachments/1/77/chart.png",
            "name": "chart.png",
            "mime_type": "image/png",
            "size": 5120,
            "width": 640,
            "height": 480,
        }
    ]


@pytest.mark.parametrize(
    ("kind", "media", "expected"),
    [
        (
            "document",
            {"id": "d1", "mime_type": "application/pdf", "filename": "q3.pdf", "caption": "Q3"},
            {"kind": "document", "file_id": "d1", "mime_type": "application/pdf", "name": "q3.pdf"},
        ),
        (
            "audio",
            {"id": "a1", "mime_type": "audio/ogg; codecs=opus", "voice": True},
            {"kind": "voice", "file_id": "a1", "mime_type": "audio/ogg; codecs=opus"},
        ),
        ("video", {"id": "v1", "mime_type": "video/mp4"}, None),
        ("sticker", {"id": "s1", "mime_type": "image/webp", "animated": False}, None),
    ],
)
def test_whatsapp_media_are_recorded_by_media_id(
    kind: str, media: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    message = {"from": "4915", "id": "wamid.M", "timestamp": "1697043379", "type": kind}
    value = {"metadata": {"phone_number_id": "1"}, "messages": [{**message, kind: media}]}
    body = {"object": "whatsapp_business_account", "entry": [{"changes": [{"value": value}]}]}
    event = _one(WhatsAppAdapter("s", "v"), json.dumps(body).encode())
    assert event.routable and event.text == media.get("caption")
    assert _files(event) == [
        expected or {"kind": kind, "file_id": media["id"], "mime_type": media["mime_type"]}
    ]


def test_twilio_media_urls_and_types_from_a_courier_mms() -> None:
    form = (
        "SmsStatus=received&NumMedia=2&Body=&To=%2B12028831111&From=%2B14133881111"
        "&MessageSid=SMe287&MediaUrl0=https%3A%2F%2Fapi.twilio.com%2F2010-04-01%2FAccounts%2FAC1"
        "%2FMessages%2FMM1%2FMedia%2FME1&MediaContentType0=image%2Fjpeg&MediaUrl1=dog.jpg"
    )
    event = _one(TwilioAdapter("t"), form.encode(), {})
    assert event.routable and event.text is None
    assert _files(event) == [
        {
            "kind": "image",
            "file_id": "ME1",
            "url": "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1",
            "mime_type": "image/jpeg",
        },
        {"kind": "file", "file_id": "dog.jpg", "url": "dog.jpg"},
    ]


def test_an_email_that_is_only_an_image_attachment_is_a_message() -> None:
    mail = (
        b"From: Ada <ada@example.com>\nTo: bot@example.com\nMessage-ID: <img@x>\n"
        b'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
        b"--B\nContent-Type: image/png\n"
        b'Content-Disposition: attachment; filename="cat.png"\n'
        b"Content-Transfer-Encoding: base64\n\niVBORw0KGgo=\n--B--\n"
    )
    event = _one(EmailAdapter("s"), mail, {"content-type": "message/rfc822"})
    assert event.routable
    assert _files(event) == [
        {"kind": "image", "name": "cat.png", "mime_type": "image/png", "size": 8}
    ]


def test_a_generic_webhook_may_carry_attachments_without_text() -> None:
    files = [{"url": "https://example.com/a.png", "mime_type": "image/png", "width": 3}]
    body = json.dumps({"type": "message", "data": {"attachments": files}}).encode()
    headers = {"webhook-id": "msg_1", "webhook-timestamp": "1700000000"}
    event = _one(StandardWebhookAdapter("whsec_x"), body, headers)
    assert event.routable and event.text is None
    assert _files(event) == [
        {"kind": "image", "url": "https://example.com/a.png", "mime_type": "image/png", "width": 3}
    ]


# -- bounds -----------------------------------------------------------------------------------


def test_odd_fields_are_clipped_or_unknown_never_refused() -> None:
    made = attachment(
        "x" * 100,
        file_id="f" * 600,
        url="https://e/" + "u" * 3000,
        mime_type=["image/png"],
        name="n" * 1000,
        size=-1,
        width=2**80,
        height=True,
        duration=1.6,
    )
    assert made.model_dump(exclude_none=True) == {
        "kind": "x" * 32,
        "name": "n" * 255,
        "duration": 2,
    }


def test_a_body_with_a_thousand_files_keeps_the_first_twenty() -> None:
    many = [{"id": f"F{i}", "name": f"{i}.txt", "mimetype": "text/plain"} for i in range(1000)]
    payload = {
        "type": "event_callback",
        "event_id": "Ev10",
        "event": {"type": "message", "user": "U1", "ts": "1.0", "channel": "C1", "files": many},
    }
    event = _one(SlackAdapter("s"), json.dumps(payload).encode())
    assert len(event.attachments) == MAX_ATTACHMENTS == 20
    assert [a.file_id for a in event.attachments] == [f"F{i}" for i in range(20)]
    assert capped(iter(event.attachments * 3)) == event.attachments


def test_telegram_photo_sizes_of_the_wrong_shape_are_not_a_500() -> None:
    event = _telegram(photo=["not a size", {"file_id": 7, "file_size": "big"}])
    assert _files(event) == [{"kind": "image", "file_id": "7", "mime_type": "image/jpeg"}]
