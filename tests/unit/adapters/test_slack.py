"""Slack: the published v0 signing vector, the replay window, and Events API payloads."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from urllib.parse import urlencode

import pytest

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.slack import SlackAdapter
from nexus.event import NexusEvent

# Slack's own example from "Verifying requests from Slack" (also python-slack-sdk's test).
VECTOR_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
VECTOR_TIMESTAMP = 1531420618
VECTOR_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
VECTOR_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-"
    b"collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F3977008"
    b"85554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c"
    b"447fce8b6703c"
)
NOW_MS = VECTOR_TIMESTAMP * 1000
SECRET = "test-signing-secret"
FORM = "application/x-www-form-urlencoded"


def _signed(
    body: bytes,
    *,
    secret: str = SECRET,
    timestamp: int = VECTOR_TIMESTAMP,
    content_type: str = "application/json",
) -> InboundRequest:
    base = f"v0:{timestamp}:".encode() + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    headers = {
        "x-slack-request-timestamp": str(timestamp),
        "x-slack-signature": signature,
        "content-type": content_type,
    }
    return InboundRequest(
        method="POST", url="https://x/v1/inbound/slack", headers=headers, body=body
    )


def _callback(event: dict[str, Any], event_id: str = "Ev111", **extra: Any) -> dict[str, Any]:
    """The bolt-python scenario envelope around one inner event."""
    return {
        "token": "verification_token",
        "team_id": "T111",
        "enterprise_id": "E111",
        "api_app_id": "A111",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1599616881,
        **extra,
    }


def _outcome(body: bytes, content_type: str = "application/json") -> Any:
    adapter = SlackAdapter(SECRET)
    request = _signed(body, content_type=content_type)
    adapter.verify(request, now_ms=NOW_MS)
    return adapter.parse(request)


def _parse(payload: dict[str, Any]) -> NexusEvent:
    outcome = _outcome(json.dumps(payload).encode())
    assert outcome.answer is None and len(outcome.events) == 1
    event: NexusEvent = outcome.events[0]
    assert event.adapter == event.platform == "slack"
    assert event.raw == payload
    return event


def _where(event: NexusEvent) -> tuple[str, str] | None:
    return (event.container.kind, event.container.id) if event.container else None


# --- signatures ---------------------------------------------------------------------------


def test_the_published_vector_verifies_and_parses_as_a_slash_command() -> None:
    adapter = SlackAdapter(VECTOR_SECRET)
    headers = {
        "x-slack-request-timestamp": str(VECTOR_TIMESTAMP),
        "x-slack-signature": VECTOR_SIGNATURE,
        "content-type": FORM,
    }
    request = InboundRequest(method="POST", url="https://x", headers=headers, body=VECTOR_BODY)
    adapter.verify(request, now_ms=NOW_MS)
    outcome = adapter.parse(request)
    assert outcome.answer is None
    event = outcome.events[0]
    assert event.id == "slack:cmd:398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    assert event.kind == "message" and event.routable
    assert event.text == "/webhook-collect" and event.space == "T1DC2JH3J"
    assert _where(event) == ("group", "G8PSS9T3V")
    assert event.sender is not None
    assert (event.sender.id, event.sender.display_name) == ("U2CERLKJA", "roadrunner")
    assert event.occurred_at == NOW_MS  # the signed request timestamp dates a form
    assert event.raw["response_url"].startswith("https://hooks.slack.com/commands/")


def test_the_vector_verifies_anywhere_inside_the_window() -> None:
    adapter = SlackAdapter(VECTOR_SECRET)
    headers = {
        "x-slack-request-timestamp": str(VECTOR_TIMESTAMP),
        "x-slack-signature": VECTOR_SIGNATURE,
    }
    request = InboundRequest(method="POST", url="https://x", headers=headers, body=VECTOR_BODY)
    adapter.verify(request, now_ms=NOW_MS + 300_000)
    adapter.verify(request, now_ms=NOW_MS - 300_000)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"body": VECTOR_BODY + b"&extra=1"}, "X-Slack-Signature does not match"),
        ({"secret": "wrong"}, "does not match"),
        ({"signature": "v0=" + "0" * 64}, "does not match"),
        ({"timestamp": str(VECTOR_TIMESTAMP + 1)}, "does not match"),  # the stamp is signed too
        ({"now_ms": NOW_MS + 301_000}, "stale"),
        ({"now_ms": NOW_MS - 301_000}, "stale"),
        ({"timestamp": "yesterday"}, "not a Unix time"),
        ({"drop": "x-slack-signature"}, "missing"),
        ({"drop": "x-slack-request-timestamp"}, "missing"),
    ],
)
def test_tampering_a_wrong_secret_staleness_and_missing_headers_are_401(
    change: dict[str, Any], reason: str
) -> None:
    adapter = SlackAdapter(change.get("secret", VECTOR_SECRET))
    headers = {
        "x-slack-request-timestamp": change.get("timestamp", str(VECTOR_TIMESTAMP)),
        "x-slack-signature": change.get("signature", VECTOR_SIGNATURE),
    }
    headers.pop(change.get("drop", ""), None)
    request = InboundRequest(
        method="POST", url="https://x", headers=headers, body=change.get("body", VECTOR_BODY)
    )
    with pytest.raises(SignatureRejected, match=reason):
        adapter.verify(request, now_ms=change.get("now_ms", NOW_MS))


@pytest.mark.parametrize("secret", [None, "", "   "])
def test_no_secret_means_slack_is_off(secret: str | None) -> None:
    with pytest.raises(SignatureRejected, match="NEXUS_SLACK_SIGNING_SECRET is not set"):
        SlackAdapter(secret).verify(_signed(b"{}"), now_ms=NOW_MS)


# --- Events API -----------------------------------------------------------------------------


def test_url_verification_answers_the_challenge() -> None:
    payload = {
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        "type": "url_verification",
    }
    outcome = _outcome(json.dumps(payload).encode())
    assert outcome.events == ()
    assert outcome.answer is not None and outcome.answer.body == {
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    }


def test_a_channel_message() -> None:
    event = _parse(
        _callback(
            {
                "client_msg_id": "968c94da-c271-4f2a-8ec9-12a9985e5df4",
                "type": "message",
                "text": "Hi there! Thanks for sharing the info!",
                "user": "W111",
                "ts": "1610261659.001400",
                "team": "T111",
                "channel": "C111",
                "event_ts": "1610261659.001400",
                "channel_type": "channel",
            },
            event_id="Ev01JZ2T7S3U",
            event_time=1610261659,
        )
    )
    assert event.id == "slack:Ev01JZ2T7S3U"
    assert event.kind == "message" and event.routable and event.ignore_reason is None
    assert event.space == "T111"
    assert _where(event) == ("channel", "C111")
    assert event.sender is not None and (event.sender.id, event.sender.is_bot) == ("W111", False)
    assert event.text == "Hi there! Thanks for sharing the info!"
    assert event.platform_thread_id is None and event.reply_to is None
    assert event.message_id == "1610261659.001400"
    assert event.occurred_at == 1610261659000


def test_a_thread_reply_in_a_dm() -> None:
    event = _parse(
        _callback(
            {
                "user": "W222",
                "type": "message",
                "ts": "1726133700.887259",
                "text": "When Slack was released?",
                "team": "T111",
                "user_team": "T111",
                "source_team": "T222",
                "user_profile": {},
                "thread_ts": "1726133698.626339",
                "parent_user_id": "W222",
                "channel": "D111",
                "event_ts": "1726133700.887259",
                "channel_type": "im",
            }
        )
    )
    assert event.id == "slack:Ev111" and event.routable
    assert _where(event) == ("dm", "D111")
    assert event.platform_thread_id == "1726133698.626339"
    assert event.message_id == "1726133700.887259"
    assert event.occurred_at == 1599616881000  # event_time, not ts
    assert event.sender is not None and event.sender.id == "W222"


def test_a_thread_root_is_not_inside_its_thread_and_ts_dates_it_without_event_time() -> None:
    payload = _callback(
        {
            "type": "message",
            "user": "U1",
            "text": "hi",
            "ts": "1726133698.626339",
            "thread_ts": "1726133698.626339",
            "channel": "G0123",
            "channel_type": "mpim",
            "user_profile": {"display_name": "", "real_name": "Ann Example", "name": "ann"},
        }
    )
    del payload["event_time"]
    event = _parse(payload)
    assert _where(event) == ("group", "G0123")
    assert event.platform_thread_id is None
    assert event.occurred_at == 1726133698626
    assert event.sender is not None and event.sender.display_name == "Ann Example"


@pytest.mark.parametrize(
    ("channel", "kind"), [("C111", "channel"), ("G222", "group"), ("D333", "dm")]
)
def test_app_mention_is_a_message_placed_by_the_channel_prefix(channel: str, kind: str) -> None:
    event = _parse(
        _callback(
            {
                "client_msg_id": "9cbd4c5b-7ddf-4ede-b479-ad21fca66d63",
                "type": "app_mention",
                "text": "<@W111> Hi there!",
                "user": "W222",
                "ts": "1595926230.009600",
                "team": "T111",
                "channel": channel,
                "event_ts": "1595926230.009600",
            },
            event_time=1595926230,
        )
    )
    assert event.kind == "message" and event.routable
    assert _where(event) == (kind, channel)
    assert event.text == "<@W111> Hi there!"
    assert event.occurred_at == 1595926230000


def test_a_thread_broadcast_is_a_message_in_its_thread() -> None:
    event = _parse(
        _callback(
            {
                "type": "message",
                "subtype": "thread_broadcast",
                "text": "also sending to the channel",
                "user": "U111",
                "ts": "1643810217.088700",
                "thread_ts": "1643810166.070400",
                "root": {"text": "first", "user": "U111", "ts": "1643810166.070400"},
                "channel": "C111",
                "event_ts": "1643810217.088700",
                "channel_type": "channel",
            }
        )
    )
    assert event.kind == "message" and event.routable
    assert event.platform_thread_id == "1643810166.070400"
    assert event.message_id == "1643810217.088700"


def test_an_edit_is_recorded_under_the_edited_message() -> None:
    event = _parse(
        _callback(
            {
                "type": "message",
                "subtype": "message_changed",
                "message": {
                    "type": "message",
                    "text": "updated message",
                    "user": "U111",
                    "team": "T111",
                    "edited": {"user": "U111", "ts": "1665102362.000000"},
                },
                "previous_message": {
                    "type": "message",
                    "text": "original message",
                    "user": "U222",
                    "team": "T111",
                    "ts": "1665102338.901939",
                },
                "channel": "C111",
                "hidden": True,
                "ts": "1665102362.013600",
                "event_ts": "1665102362.013600",
                "channel_type": "channel",
            },
            event_time=1665102362,
        )
    )
    assert event.kind == "edit" and not event.routable
    assert event.ignore_reason == "edits are not answered"
    assert event.text == "updated message"
    assert event.sender is not None and event.sender.id == "U111"
    assert event.message_id == "1665102338.901939"  # the message's ts, not the edit's
    assert event.occurred_at == 1665102362000


def test_a_deletion_is_an_edit_with_its_own_reason() -> None:
    event = _parse(
        _callback(
            {
                "type": "message",
                "subtype": "message_deleted",
                "hidden": True,
                "channel": "C111",
                "ts": "1358878755.000001",
                "deleted_ts": "1358878749.000002",
                "previous_message": {
                    "type": "message",
                    "user": "U1",
                    "text": "oops",
                    "ts": "1358878749.000002",
                },
                "channel_type": "channel",
            }
        )
    )
    assert event.kind == "edit" and not event.routable
    assert event.ignore_reason == "a deleted message is recorded, not answered"
    assert event.message_id == "1358878749.000002"


def test_an_edit_of_a_bot_post_is_still_an_edit() -> None:
    event = _parse(
        _callback(
            {
                "type": "message",
                "subtype": "message_changed",
                "message": {"text": "v2", "bot_id": "B1", "ts": "1.0", "subtype": "bot_message"},
                "channel": "C1",
                "ts": "2.0",
                "channel_type": "channel",
            }
        )
    )
    assert event.kind == "edit" and event.sender is not None and event.sender.is_bot


def test_a_classic_bot_message_is_a_bot_echo() -> None:
    event = _parse(
        _callback(
            {
                "type": "message",
                "subtype": "bot_message",
                "text": "Hi there! Thanks for sharing the info!",
                "ts": "1610262363.001600",
                "username": "classic-bot",
                "bot_id": "B888",
                "channel": "C111",
                "event_ts": "1610262363.001600",
                "channel_type": "channel",
            },
            event_id="Ev333",
        )
    )
    assert event.id == "slack:Ev333"
    assert event.kind == "bot_echo" and not event.routable and event.ignore_reason
    assert event.sender is not None
    assert (event.sender.id, event.sender.display_name, event.sender.is_bot) == (
        "B888",
        "classic-bot",
        True,
    )


def test_an_app_post_with_a_bot_profile_is_a_bot_echo() -> None:
    event = _parse(
        _callback(
            {
                "bot_id": "B999",
                "type": "message",
                "text": "Hi there! Thanks for sharing the info!",
                "user": "UB111",
                "ts": "1610261539.000900",
                "team": "T111",
                "bot_profile": {"id": "B999", "name": "other-app", "app_id": "A222"},
                "channel": "C111",
                "event_ts": "1610261539.000900",
                "channel_type": "channel",
            },
            event_id="Ev222",
        )
    )
    assert event.kind == "bot_echo" and not event.routable
    assert event.sender is not None
    assert (event.sender.id, event.sender.display_name, event.sender.is_bot) == (
        "UB111",
        "other-app",
        True,
    )


def test_a_channel_join_is_a_system_event() -> None:
    event = _parse(
        _callback(
            {
                "type": "message",
                "subtype": "channel_join",
                "user": "U1",
                "text": "<@U1> has joined the channel",
                "ts": "5.0",
                "channel": "C1",
                "channel_type": "channel",
            }
        )
    )
    assert event.kind == "system" and not event.routable
    assert event.ignore_reason == "channel event (channel_join)"


def test_other_event_types_are_recorded_as_unsupported() -> None:
    event = _parse(
        _callback(
            {
                "type": "reaction_added",
                "user": "U1",
                "reaction": "+1",
                "item": {"type": "message", "channel": "C1", "ts": "1.0"},
                "event_ts": "1360782804.083113",
            }
        )
    )
    assert event.kind == "unsupported" and not event.routable
    assert event.ignore_reason == "Slack event type reaction_added is not handled"


def test_a_file_share_with_a_caption_keeps_the_file() -> None:
    event = _parse(
        _callback(
            {
                "type": "message",
                "subtype": "file_share",
                "user": "U1",
                "text": "the chart",
                "ts": "6.0",
                "channel": "D1",
                "channel_type": "im",
                "files": [
                    {
                        "id": "F1",
                        "name": "chart.png",
                        "mimetype": "image/png",
                        "size": 2048,
                        "url_private": "https://files.slack.com/files-pri/T1-F1/chart.png",
                        "original_w": 800,
                        "original_h": 600,
                    },
                    {"id": "F2", "name": "q3.pdf", "mimetype": "application/pdf"},
                ],
            }
        )
    )
    assert event.kind == "message" and event.routable and event.text == "the chart"
    assert [a.model_dump(exclude_none=True) for a in event.attachments] == [
        {
            "kind": "image",
            "file_id": "F1",
            "url": "https://files.slack.com/files-pri/T1-F1/chart.png",
            "name": "chart.png",
            "mime_type": "image/png",
            "size": 2048,
            "width": 800,
            "height": 600,
        },
        {"kind": "document", "file_id": "F2", "name": "q3.pdf", "mime_type": "application/pdf"},
    ]


def test_a_message_with_neither_text_nor_files_is_unsupported() -> None:
    event = _parse(
        _callback({"type": "message", "user": "U1", "ts": "7.0", "channel": "C1", "text": ""})
    )
    assert event.kind == "unsupported" and event.ignore_reason == "no text or files"


def test_a_redelivery_has_the_same_id() -> None:
    payload = _callback({"type": "message", "user": "U1", "text": "x", "ts": "1.0"})
    assert _parse(payload).id == _parse(payload).id == "slack:Ev111"


def test_app_rate_limited_is_a_system_event() -> None:
    payload = {
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "type": "app_rate_limited",
        "team_id": "T123456",
        "minute_rate_limited": 1518467820,
        "api_app_id": "A123456",
    }
    event = _parse(payload)
    assert event.id == "slack:rate_limited:T123456:1518467820"
    assert event.kind == "system" and not event.routable and event.space == "T123456"
    assert event.occurred_at == 1518467820000


# --- form bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel_id", "channel_name", "kind"),
    [
        ("D0123", "directmessage", "dm"),
        ("C0PRIV", "privategroup", "group"),
        ("C0MPIM", "mpdm-ann--bob-1", "group"),
        ("C0PUB", "general", "channel"),
    ],
)
def test_a_slash_command_is_placed_by_its_channel(
    channel_id: str, channel_name: str, kind: str
) -> None:
    form = {
        "team_id": "T1",
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": "U1",
        "command": "/ask",
        "text": "  what is up  ",
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
    }
    outcome = _outcome(urlencode(form).encode(), content_type=f"{FORM}; charset=utf-8")
    event = outcome.events[0]
    assert event.id == "slack:cmd:13345224609.738474920.8088930838d88f008e0"
    assert event.text == "/ask   what is up"
    assert _where(event) == (kind, channel_id)


def test_an_interactive_payload_is_recorded_not_refused() -> None:
    payload = {
        "type": "view_submission",
        "team": {"id": "T9TK3CUKW", "domain": "example"},
        "user": {"id": "UA8RXUSPL", "name": "jtorrance"},
        "trigger_id": "12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3",
        "channel": {"id": "CBR2V3XEX", "name": "review-updates"},
        "view": {"id": "V1"},
    }
    outcome = _outcome(urlencode({"payload": json.dumps(payload)}).encode(), content_type=FORM)
    event = outcome.events[0]
    assert event.id == "slack:interaction:12321423423.333649436676.d8c1bb837935619ccad0f624c448ffb3"
    assert event.kind == "unsupported" and not event.routable
    assert event.ignore_reason == "interactive payload view_submission is not handled"
    assert event.space == "T9TK3CUKW" and _where(event) == ("channel", "CBR2V3XEX")
    assert event.sender is not None and event.sender.display_name == "jtorrance"


def _block_actions(action: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A button press as Slack's interactivity posts it (the docs' block_actions example)."""
    return {
        "type": "block_actions",
        "team": {"id": "T9TK3CUKW", "domain": "example"},
        "user": {"id": "UA8RXUSPL", "username": "jtorrance", "name": "jtorrance"},
        "api_app_id": "AABA1ABCD",
        "trigger_id": "12466734323.1395872398.76a4bcb6c6dd4a63d2ee2e3e4d1cd4d8",
        "container": {"type": "message", "message_ts": "1548261231.000200",
                      "channel_id": "CBR2V3XEX", "is_ephemeral": False},
        "channel": {"id": "CBR2V3XEX", "name": "review-updates"},
        "message": {"type": "message", "ts": "1548261231.000200", "text": "Pay?"},
        "response_url": "https://hooks.slack.com/actions/AABA1ABCD/1232321423432/D09sSasdasdAS9",
        "actions": [{"type": "button", "block_id": "nexus_row_0", "action_ts": "1548426417.840180",
                     **action}],
        **extra,
    }  # fmt: skip


def _press(payload: dict[str, Any]) -> NexusEvent:
    outcome = _outcome(urlencode({"payload": json.dumps(payload)}).encode(), content_type=FORM)
    assert outcome.answer is None  # Slack wants an empty 200 within 3 s; nothing else
    event: NexusEvent = outcome.events[0]
    return event


def test_a_button_press_is_the_person_saying_its_value() -> None:
    event = _press(_block_actions({"action_id": "nexus_0_0", "value": "pay",
                                   "text": {"type": "plain_text", "text": "Pay now"}}))  # fmt: skip
    assert event.id == "slack:interaction:12466734323.1395872398.76a4bcb6c6dd4a63d2ee2e3e4d1cd4d8"
    assert (event.kind, event.routable, event.text) == ("callback", True, "pay")
    assert event.space == "T9TK3CUKW" and _where(event) == ("channel", "CBR2V3XEX")
    assert event.sender is not None and event.sender.id == "UA8RXUSPL"
    assert event.reply_to == "1548261231.000200" and event.platform_thread_id is None


def test_a_button_press_in_a_thread_stays_in_the_thread() -> None:
    payload = _block_actions({"action_id": "nexus_0_1", "value": "later"})
    payload["container"]["thread_ts"] = "1548261200.000100"
    payload["message"]["thread_ts"] = "1548261200.000100"
    event = _press(payload)
    assert event.routable and event.platform_thread_id == "1548261200.000100"


def test_a_link_button_click_is_recorded_not_answered() -> None:
    event = _press(_block_actions({"action_id": "nexus_1_0", "url": "https://example.com"}))
    assert event.kind == "unsupported" and not event.routable
    assert event.ignore_reason == "a button press without a value"


def test_an_interactive_payload_without_a_trigger_is_named_by_its_bytes() -> None:
    body = urlencode({"payload": json.dumps({"type": "view_closed", "view": {}})}).encode()
    first, again = _outcome(body, FORM).events[0], _outcome(body, FORM).events[0]
    assert first.id == again.id and first.id.startswith("slack:interaction:sha256-")


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"type": "event_callback"}',
        b'{"type": "event_callback", "event_id": "Ev1", "event": "text"}',
        b'{"type": "url_verification"}',
        b'{"type": "app_rate_limited", "team_id": "T1"}',
        b'{"type": "block_actions"}',
    ],
)
def test_malformed_json_bodies_are_400(body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        SlackAdapter(SECRET).parse(_signed(body))


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe", b"no-equals-sign", b"command=%2Fask", b"payload=not-json", b"payload=%5B%5D"],
)
def test_malformed_form_bodies_are_400(body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        SlackAdapter(SECRET).parse(_signed(body, content_type=FORM))
