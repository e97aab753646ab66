"""Telegram: secret-token check, and Updates shaped like the Bot API's own examples."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.telegram import SECRET_HEADER, TelegramAdapter

SECRET = "s3cr3t_token-1"
adapter = TelegramAdapter(SECRET)


def _request(update: Any, token: str | None = SECRET) -> InboundRequest:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers[SECRET_HEADER.lower()] = token
    body = update if isinstance(update, bytes) else json.dumps(update).encode()
    return InboundRequest(
        method="POST", url="https://bot.example/v1/inbound/telegram", headers=headers, body=body
    )


def _private(text: str = "/start", **extra: Any) -> dict[str, Any]:
    return {
        "update_id": 10000,
        "message": {
            "date": 1441645532,
            "chat": {
                "last_name": "Test Lastname",
                "id": 1111111,
                "type": "private",
                "first_name": "Test Firstname",
                "username": "Testusername",
            },
            "message_id": 1365,
            "from": {
                "last_name": "Test Lastname",
                "id": 1111111,
                "first_name": "Test Firstname",
                "username": "Testusername",
                "is_bot": False,
            },
            "text": text,
            **extra,
        },
    }


def _parse(update: Any):
    outcome = adapter.parse(_request(update))
    assert outcome.answer is None
    assert len(outcome.events) == 1
    return outcome.events[0]


def test_private_text() -> None:
    event = _parse(_private())
    assert event.id == "telegram:10000"
    assert event.kind == "message" and event.routable
    assert event.container is not None and (event.container.kind, event.container.id) == (
        "dm",
        "1111111",
    )
    assert event.sender is not None and event.sender.display_name == "Test Firstname Test Lastname"
    assert event.text == "/start"
    assert event.message_id == "1365"
    assert event.occurred_at == 1441645532000
    assert event.raw["update_id"] == 10000


def test_reply_keeps_the_replied_message_id() -> None:
    update = _private(
        "yes",
        reply_to_message={
            "message_id": 1364,
            "date": 1441645000,
            "chat": {"id": 1111111, "type": "private"},
            "text": "want a reply?",
        },
    )
    assert _parse(update).reply_to == "1364"


def test_group_reply_thread_is_not_a_topic() -> None:
    update = {
        "update_id": 439432600,
        "message": {
            "chat": {"id": -1001293752024, "title": "CryptoInside Chat", "type": "supergroup"},
            "date": 1721592580,
            "from": {"first_name": "the Cable Guy", "id": 5964236329, "is_bot": False},
            "message_id": 134546,
            "message_thread_id": 134545,
            "text": "/report",
            "reply_to_message": {
                "message_id": 134545,
                "date": 1721592028,
                "chat": {"id": -1001293752024, "type": "supergroup"},
            },
        },
    }
    event = _parse(update)
    assert event.container is not None and event.container.kind == "group"
    assert event.platform_thread_id is None
    assert event.reply_to == "134545"


def test_forum_topic_message_carries_its_topic() -> None:
    update = {
        "update_id": 7,
        "message": {
            "message_id": 5,
            "message_thread_id": 4,
            "is_topic_message": True,
            "date": 1681725680,
            "chat": {"id": -1001847508954, "title": "Test", "is_forum": True, "type": "supergroup"},
            "from": {"id": 5206433298, "is_bot": False, "first_name": "Tester"},
            "text": "in a topic",
        },
    }
    event = _parse(update)
    assert event.platform_thread_id == "4"
    assert event.container is not None and event.container.id == "-1001847508954"


def test_edit_is_recorded_but_not_answered() -> None:
    update = _private("changed")
    update["edited_message"] = update.pop("message") | {"edit_date": 1441646600}
    event = _parse(update)
    assert event.kind == "edit"
    assert not event.routable
    assert event.ignore_reason == "edits are not answered"


def test_photo_with_caption_uses_the_largest_size() -> None:
    update = _private(
        photo=[
            {
                "file_id": "small",
                "file_unique_id": "a",
                "width": 90,
                "height": 51,
                "file_size": 1101,
            },
            {
                "file_id": "large",
                "file_unique_id": "b",
                "width": 1280,
                "height": 720,
                "file_size": 63000,
            },
        ],
        caption="look at this",
    )
    del update["message"]["text"]
    event = _parse(update)
    assert event.text == "look at this"
    assert [a.model_dump(exclude_none=True) for a in event.attachments] == [
        {
            "kind": "image",
            "file_id": "large",
            "mime_type": "image/jpeg",
            "size": 63000,
            "width": 1280,
            "height": 720,
        }
    ]


def test_voice_without_text_is_still_a_message() -> None:
    update = _private(
        voice={"file_id": "AwADBAAD", "duration": 5, "mime_type": "audio/ogg", "file_size": 23000}
    )
    del update["message"]["text"]
    event = _parse(update)
    assert event.routable
    assert event.attachments[0].kind == "voice"
    assert event.attachments[0].mime_type == "audio/ogg"


def test_bot_echo_is_ignored_with_a_reason() -> None:
    update = _private("I am the bot")
    update["message"]["from"]["is_bot"] = True
    event = _parse(update)
    assert event.kind == "bot_echo" and not event.routable


def test_service_message_is_ignored_with_a_reason() -> None:
    update = _private()
    del update["message"]["text"]
    update["message"]["forum_topic_created"] = {"name": "Topic", "icon_color": 7322096}
    event = _parse(update)
    assert event.kind == "system"
    assert event.ignore_reason == "service message (forum_topic_created)"


def _pressed(update: dict[str, Any]) -> Any:
    outcome = adapter.parse(_request(update))
    [event] = outcome.events
    return event


def test_callback_query_routes_its_data() -> None:
    update = {
        "update_id": 10001,
        "callback_query": {
            "id": "4382bfdwdsb323b2d9",
            "data": "Data from button callback",
            "from": {"id": 1111111, "first_name": "Test Firstname", "is_bot": False},
            "message": {
                "message_id": 77,
                "date": 1441645532,
                "chat": {"id": 1111111, "type": "private"},
            },
        },
    }
    event = _pressed(update)
    assert event.kind == "callback" and event.routable
    assert event.text == "Data from button callback"
    assert event.reply_to == "77"


def test_a_callback_is_acknowledged_in_the_webhooks_answer() -> None:
    update = {
        "update_id": 10003,
        "callback_query": {"id": "4382bfdwdsb323b2d9", "data": "pay", "from": {"id": 1}},
    }
    outcome = TelegramAdapter(SECRET).parse(_request(update))
    assert outcome.answer is not None
    assert outcome.answer.body == {
        "method": "answerCallbackQuery",
        "callback_query_id": "4382bfdwdsb323b2d9",
    }
    assert outcome.events[0].routable


def test_a_callback_in_a_forum_topic_is_answered_in_the_topic() -> None:
    update = {
        "update_id": 10002,
        "callback_query": {
            "id": "4382bfdwdsb323b2e0",
            "data": "pay",
            "from": {"id": 1111111, "first_name": "Ann", "is_bot": False},
            "message": {
                "message_id": 78,
                "message_thread_id": 5,
                "is_topic_message": True,
                "date": 1441645532,
                "chat": {"id": -1001234, "type": "supergroup", "is_forum": True},
            },
        },
    }
    event = _pressed(update)
    assert event.routable and event.text == "pay" and event.platform_thread_id == "5"


def test_unknown_update_types_are_recorded_as_unsupported() -> None:
    event = _parse({"update_id": 5, "poll": {"id": "1"}})
    assert event.kind == "unsupported"
    assert event.ignore_reason == "update type poll is not handled"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1,2]",
        json.dumps({"message": {}}).encode(),
        json.dumps({"update_id": "7"}).encode(),
    ],
)
def test_malformed_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        adapter.parse(_request(body))


def test_the_secret_token_is_checked() -> None:
    adapter.verify(_request(_private()), now_ms=0)
    with pytest.raises(SignatureRejected, match="does not match"):
        adapter.verify(_request(_private(), token="wrong"), now_ms=0)
    with pytest.raises(SignatureRejected, match="missing"):
        adapter.verify(_request(_private(), token=None), now_ms=0)


def test_an_unconfigured_secret_rejects_everything() -> None:
    with pytest.raises(SignatureRejected, match="NEXUS_TELEGRAM_SECRET_TOKEN"):
        TelegramAdapter(None).verify(_request(_private()), now_ms=0)
