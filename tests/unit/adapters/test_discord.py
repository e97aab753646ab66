"""Discord: a real signed PING, Ed25519 checks, and interaction payloads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nacl.signing import SigningKey

from nexus.adapters.inbound.base import (
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
)
from nexus.adapters.inbound.discord import DiscordAdapter
from nexus.event import NexusEvent

# A real PING Discord sent on 2020-12-12 and its signature (mewna/catnip's test vector).
VECTOR_KEY = "48c85c48446ce9580ccc41427b5dee61d33b3b03e9219cbfadb4e815e59e8e94"
VECTOR_SIGNATURE = (
    "25c1272150dbb451dd5ebcf395a85329824ba49672ffc62fe7ec3992eacc6db0"
    "c9781f29ac8ca46e861cd11eb89db7febcdb3dd77c428ef22bf5ca854b3c6905"
)
VECTOR_TIMESTAMP = "1607770434"
VECTOR_BODY = (
    b'{"id":"787271007046991882","token":"aW50ZXJhY3Rpb246Nzg3MjcxMDA3MDQ2OTkxODgyOlJWNnZH'
    b"a1FYM0RxRVdka0hHaGxjQ256MlZSMXE0RUVjdHVZdmtoMFB5Z3RuZnhBQzVybTFickx1YWRQU1JUZ2tsMWtP"
    b'eVBkYkxPSTAxYkVnMTRHejhHcWt5RG1KclUyeUppZzA4NFNkZlZxZGF3MXdYQldQUVZ0V1NyYXJkdnFQ","t'
    b'ype":1,"version":1}'
)
NOW_MS = 1_607_770_434_000
KEY = SigningKey(b"\x07" * 32)
PUBLIC_HEX = KEY.verify_key.encode().hex()
STAMP = "1700000000"


def _vector(
    body: bytes = VECTOR_BODY,
    signature: str = VECTOR_SIGNATURE,
    timestamp: str = VECTOR_TIMESTAMP,
) -> InboundRequest:
    headers = {"x-signature-ed25519": signature, "x-signature-timestamp": timestamp}
    return InboundRequest(method="POST", url="https://x", headers=headers, body=body)


def _signed(interaction: dict[str, Any]) -> InboundRequest:
    body = json.dumps(interaction).encode()
    signature = KEY.sign(STAMP.encode() + body).signature.hex()
    headers = {"x-signature-ed25519": signature, "x-signature-timestamp": STAMP}
    return InboundRequest(method="POST", url="https://x", headers=headers, body=body)


# --- signatures ---------------------------------------------------------------------------


def test_the_real_ping_verifies_and_is_answered_with_pong() -> None:
    adapter = DiscordAdapter(VECTOR_KEY)
    request = _vector()
    adapter.verify(request, now_ms=NOW_MS)
    outcome = adapter.parse(request)
    assert outcome.events == () and outcome.answer is not None
    assert outcome.answer.body == {"type": 1}


def test_no_replay_window_is_invented() -> None:
    # Discord documents none; the 2020 PING still verifies years later.
    DiscordAdapter(VECTOR_KEY).verify(_vector(), now_ms=NOW_MS + 4 * 365 * 86_400_000)


def test_the_vector_body_is_not_what_the_docs_pretty_print() -> None:
    # Signatures cover the exact bytes: the same JSON re-serialised must fail.
    reserialised = json.dumps(json.loads(VECTOR_BODY)).encode()
    with pytest.raises(SignatureRejected, match="does not match"):
        DiscordAdapter(VECTOR_KEY).verify(_vector(reserialised), now_ms=NOW_MS)


@pytest.mark.parametrize(
    ("key", "request_", "reason"),
    [
        (VECTOR_KEY, _vector(VECTOR_BODY.replace(b'"type":1', b'"type":2')), "does not match"),
        (VECTOR_KEY, _vector(timestamp="1607770435"), "does not match"),
        (VECTOR_KEY, _vector(signature=VECTOR_SIGNATURE[:-2] + "00"), "does not match"),
        (VECTOR_KEY, _vector(signature=VECTOR_SIGNATURE[:64]), "does not match"),
        (PUBLIC_HEX, _vector(), "does not match"),
        (VECTOR_KEY, _vector(signature="zz"), "X-Signature-Ed25519 is not hex"),
        ("not-hex", _vector(), "32-byte hex"),
        (VECTOR_KEY[:62], _vector(), "32-byte hex"),
        (None, _vector(), "NEXUS_DISCORD_PUBLIC_KEY is not set"),
        ("  ", _vector(), "NEXUS_DISCORD_PUBLIC_KEY is not set"),
        (VECTOR_KEY, InboundRequest("POST", "https://x", {}, VECTOR_BODY), "missing"),
        (
            VECTOR_KEY,
            InboundRequest(
                "POST", "https://x", {"x-signature-ed25519": VECTOR_SIGNATURE}, VECTOR_BODY
            ),
            "missing",
        ),
    ],
)
def test_bad_signatures_are_401(key: str | None, request_: InboundRequest, reason: str) -> None:
    with pytest.raises(SignatureRejected, match=reason):
        DiscordAdapter(key).verify(request_, now_ms=NOW_MS)


# --- interactions ---------------------------------------------------------------------------


def _command(**extra: Any) -> dict[str, Any]:
    """The "Example Interaction" of Discord's application-commands docs, trimmed."""
    return {
        "type": 2,
        "token": "A_UNIQUE_TOKEN",
        "member": {
            "user": {
                "id": "53908232506183680",
                "username": "Mason",
                "avatar": "a_d5efa99b3eeaa7dd43acca82f5692432",
                "discriminator": "1337",
                "public_flags": 131141,
            },
            "roles": ["539082325061836999"],
            "nick": None,
        },
        "id": "786008729715212338",
        "guild_id": "290926798626357999",
        "app_permissions": "442368",
        "locale": "en-US",
        "data": {
            "options": [{"type": 3, "name": "cardname", "value": "The Gitrog Monster"}],
            "type": 1,
            "name": "cardsearch",
            "id": "771825006014889984",
        },
        "channel_id": "645027906669510667",
        **extra,
    }


def _outcome(interaction: dict[str, Any]) -> InboundOutcome:
    adapter = DiscordAdapter(PUBLIC_HEX)
    request = _signed(interaction)
    adapter.verify(request, now_ms=NOW_MS)
    return adapter.parse(request)


def _event(interaction: dict[str, Any]) -> NexusEvent:
    outcome = _outcome(interaction)
    assert len(outcome.events) == 1
    event = outcome.events[0]
    assert event.adapter == event.platform == "discord"
    assert event.raw == interaction
    return event


def _where(event: NexusEvent) -> tuple[str, str] | None:
    return (event.container.kind, event.container.id) if event.container else None


def test_a_guild_slash_command_is_a_message_answered_with_a_deferral() -> None:
    outcome = _outcome(_command())
    assert outcome.answer is not None and outcome.answer.body == {"type": 5}
    event = outcome.events[0]
    assert event.id == "discord:786008729715212338"
    assert event.kind == "message" and event.routable
    assert event.text == "/cardsearch cardname: The Gitrog Monster"
    assert event.space == "290926798626357999"
    assert _where(event) == ("group", "645027906669510667")
    assert event.platform_thread_id is None and event.reply_to is None
    assert event.sender is not None
    assert (event.sender.id, event.sender.display_name, event.sender.is_bot) == (
        "53908232506183680",
        "Mason",
        False,
    )
    # 786008729715212338 >> 22 == 187399084500 ms after Discord's 2015 epoch: 2020-12-08.
    assert event.occurred_at == 1_607_469_484_500


def test_a_redelivered_interaction_has_the_same_id() -> None:
    assert _event(_command()).id == _event(_command()).id


def test_a_command_in_a_dm() -> None:
    event = _event(
        _command(
            guild_id=None,
            member=None,
            user={"id": "1", "username": "ann", "global_name": "Ann"},
            channel={"id": "900", "type": 1},
            channel_id="900",
        )
    )
    assert event.routable and event.space is None
    assert _where(event) == ("dm", "900")
    assert event.sender is not None and (event.sender.id, event.sender.display_name) == ("1", "Ann")


def test_a_command_in_a_group_dm_is_a_group() -> None:
    event = _event(
        _command(
            guild_id=None,
            member=None,
            user={"id": "1", "username": "ann"},
            channel={"id": "901", "type": 3},
            channel_id="901",
        )
    )
    assert _where(event) == ("group", "901")


def test_a_command_in_a_thread_belongs_to_the_parent_channel() -> None:
    event = _event(
        _command(channel={"id": "777", "type": 11, "parent_id": "645"}, channel_id="777")
    )
    assert _where(event) == ("group", "645")
    assert event.platform_thread_id == "777"


def test_a_command_in_a_plain_guild_channel_object_has_no_thread() -> None:
    event = _event(_command(channel={"id": "645", "type": 0, "parent_id": "1"}, channel_id="645"))
    assert _where(event) == ("group", "645") and event.platform_thread_id is None


def test_sub_command_options_are_flattened() -> None:
    data = {
        "name": "ticket",
        "options": [
            {
                "name": "admin",
                "type": 2,
                "options": [
                    {
                        "name": "open",
                        "type": 1,
                        "options": [{"name": "title", "type": 3, "value": "VPN"}],
                    }
                ],
            }
        ],
    }
    assert _event(_command(data=data)).text == "/ticket admin open title: VPN"


def test_a_sub_command_without_options_keeps_its_name() -> None:
    data = {"name": "ticket", "type": 1, "options": [{"name": "list", "type": 1}]}
    assert _event(_command(data=data)).text == "/ticket list"


def test_an_attachment_option_carries_the_file() -> None:
    data = {
        "name": "transcribe",
        "type": 1,
        "options": [
            {"name": "note", "type": 3, "value": "the standup"},
            {"name": "file", "type": 11, "value": "1123"},
        ],
        "resolved": {
            "attachments": {
                "1123": {
                    "id": "1123",
                    "filename": "standup.ogg",
                    "size": 48213,
                    "url": "https://cdn.discordapp.com/attachments/1/1123/standup.ogg",
                    "content_type": "audio/ogg",
                    "duration_secs": 12.48,
                }
            }
        },
    }
    event = _event(_command(data=data))
    assert event.text == "/transcribe note: the standup file: 1123"
    assert [a.model_dump(exclude_none=True) for a in event.attachments] == [
        {
            "kind": "audio",
            "file_id": "1123",
            "url": "https://cdn.discordapp.com/attachments/1/1123/standup.ogg",
            "name": "standup.ogg",
            "size": 48213,
            "mime_type": "audio/ogg",
            "duration": 12,
        }
    ]


def test_a_message_context_command_replies_to_its_target() -> None:
    data = {"name": "Summarise", "type": 3, "target_id": "1098765432109876543"}
    event = _event(_command(data=data))
    assert event.routable and event.reply_to == "1098765432109876543"


def test_a_button_press_is_a_callback_answered_with_a_deferral() -> None:
    outcome = _outcome(
        _command(
            type=3,
            data={"custom_id": "approve:42", "component_type": 2},
            message={"id": "555", "content": "Approve?"},
        )
    )
    assert outcome.answer is not None and outcome.answer.body == {"type": 5}
    event = outcome.events[0]
    assert (event.kind, event.routable, event.text, event.reply_to) == (
        "callback",
        True,
        "approve:42",
        "555",
    )


@pytest.mark.parametrize("kind", [4, 5])
def test_autocomplete_and_modal_submits_are_recorded_only(kind: int) -> None:
    outcome = _outcome(_command(type=kind))
    assert outcome.answer is None
    event = outcome.events[0]
    assert event.kind == "unsupported" and not event.routable
    assert event.ignore_reason == f"interaction type {kind} is not handled"


@pytest.mark.parametrize(
    "body",
    [
        b"nope",
        b"[1]",
        b'{"id": "786008729715212338"}',
        b'{"type": "2", "id": "786008729715212338"}',
        b'{"type": true, "id": "786008729715212338"}',
        b'{"type": 2}',
        b'{"type": 2, "id": "abc"}',
        b'{"type": 2, "id": 786008729715212338}',
    ],
)
def test_malformed_interactions_are_400(body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        DiscordAdapter(PUBLIC_HEX).parse(InboundRequest("POST", "https://x", {}, body))
