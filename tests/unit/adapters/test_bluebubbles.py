"""BlueBubbles (iMessage) webhooks: the shared secret, and recorded `new-message` bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.bluebubbles import SECRET_HEADER, BlueBubblesAdapter
from nexus.adapters.inbound.bounds import Guarded
from nexus.event import NexusEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "bluebubbles"
PASSWORD = "server-pass-1"
SECRET = "hook-secret-2"
adapter = BlueBubblesAdapter(SECRET, PASSWORD)


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def _request(
    body: Any, *, query: dict[str, str] | None = None, headers: dict[str, str] | None = None
) -> InboundRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return InboundRequest(
        method="POST",
        url="https://bot.example/v1/inbound/bluebubbles",
        headers={"content-type": "application/json", **(headers or {})},
        body=raw,
        query=query if query is not None else {"secret": SECRET},
    )


def _event(body: Any) -> NexusEvent:
    outcome = Guarded(adapter).parse(_request(body))
    assert outcome.answer is None and len(outcome.events) == 1
    return outcome.events[0]


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ({"secret": SECRET}, {}),
        ({"password": PASSWORD}, {}),
        ({"password": SECRET}, {}),  # either secret, under either name
        ({}, {SECRET_HEADER.lower(): SECRET}),
    ],
)
def test_the_secret_or_the_password_is_accepted(
    query: dict[str, str], headers: dict[str, str]
) -> None:
    adapter.verify(_request({}, query=query, headers=headers), now_ms=0)


@pytest.mark.parametrize(
    ("query", "headers", "reason"),
    [
        ({}, {}, "missing secret"),
        ({"secret": ""}, {}, "missing secret"),
        ({"secret": "wrong"}, {}, "does not match"),
        ({"password": PASSWORD + "x"}, {}, "does not match"),
        ({}, {SECRET_HEADER.lower(): "wrong"}, "does not match"),
    ],
)
def test_a_missing_or_wrong_secret_is_refused(
    query: dict[str, str], headers: dict[str, str], reason: str
) -> None:
    with pytest.raises(SignatureRejected, match=reason):
        adapter.verify(_request({}, query=query, headers=headers), now_ms=0)


def test_unconfigured_refuses_everything() -> None:
    with pytest.raises(SignatureRejected, match="bluebubbles is off"):
        BlueBubblesAdapter(None, "").verify(_request({}, query={"password": ""}), now_ms=0)
    with pytest.raises(SignatureRejected, match="bluebubbles is off"):
        BlueBubblesAdapter(None, None).verify(_request({}, query={"secret": "x"}), now_ms=0)


def test_a_text_from_one_person_is_a_dm_in_its_chat() -> None:
    event = _event(fixture("new-message-dm.json"))
    assert event.id == "bluebubbles:5C6A1F0E-8D2B-4E57-9B1A-3F9E2C7D4A10"
    assert (event.adapter, event.platform, event.kind) == ("bluebubbles", "imessage", "message")
    assert event.sender is not None and event.sender.id == "+15559876543"
    assert event.container is not None
    assert (event.container.kind, event.container.id) == ("dm", "iMessage;-;+15559876543")
    assert event.text == "Hi sweetie, are you coming for dinner on Sunday?"
    assert event.message_id == "5C6A1F0E-8D2B-4E57-9B1A-3F9E2C7D4A10"
    assert event.occurred_at == 1767225600123
    assert event.routable


def test_a_group_photo_is_in_the_groups_chat_with_its_attachment() -> None:
    event = _event(fixture("new-message-group-photo.json"))
    assert event.container is not None
    assert (event.container.kind, event.container.id) == (
        "group",
        "iMessage;+;chat912345678901234567",
    )
    assert event.sender is not None and event.sender.id == "aunt.jo@icloud.com"
    assert event.text == "Look at the garden!"  # the photo's U+FFFC placeholder removed
    [photo] = event.attachments
    assert photo.kind == "image" and photo.file_id == "at_0_A41B7C2D-0E3F-4A5B-8C6D-7E8F9A0B1C2D"
    # The server's download converts HEIC to JPEG, which the model can read.
    assert photo.mime_type == "image/jpeg" and photo.name == "IMG_4821.HEIC"
    assert (photo.size, photo.width, photo.height) == (1834211, 4032, 3024)
    assert event.routable


def test_a_message_from_this_account_is_recorded_never_answered() -> None:
    event = _event(fixture("new-message-from-me.json"))
    assert event.kind == "bot_echo" and not event.routable
    assert event.ignore_reason == "sent from this account (delivery dlv_01JBLUEBUBBLESECHO0000000)"
    assert event.sender is None


def test_other_event_types_are_answered_with_nothing_stored() -> None:
    for body in (fixture("updated-message.json"), {"type": "typing-indicator", "data": {}}):
        assert Guarded(adapter).parse(_request(body)).events == ()


def _dm(**changes: Any) -> dict[str, Any]:
    body = fixture("new-message-dm.json")
    body["data"].update(changes)
    return body


def test_tapbacks_and_group_events_are_recorded_only() -> None:
    tapback = _event(_dm(associatedMessageType="love", associatedMessageGuid="p:0/X", text="x"))
    assert (tapback.kind, tapback.ignore_reason) == ("system", "tapback love")
    renamed = _event(_dm(itemType=2, text=None))
    assert renamed.kind == "system" and not renamed.routable


def test_an_attachment_only_message_is_still_a_message() -> None:
    body = fixture("new-message-group-photo.json")
    body["data"]["text"] = "\ufffc"
    event = _event(body)
    assert event.text is None and len(event.attachments) == 1 and event.routable
    empty = _event(_dm(text="\ufffc"))
    assert empty.kind == "unsupported"


def test_without_chats_a_dm_guid_is_made_from_the_handle() -> None:
    event = _event(_dm(chats=[]))
    assert event.container is not None and event.container.id == "iMessage;-;+15559876543"


@pytest.mark.parametrize(
    "body",
    [
        {"data": {}},  # no type
        {"type": "new-message"},  # no data
        {"type": "new-message", "data": {"guid": 5}},
        _dm(handle=None),  # someone else's message with nobody behind it
        _dm(text={"not": "text"}, guid=["x"]),
    ],
)
def test_malformed_bodies_are_400(body: dict[str, Any]) -> None:
    with pytest.raises(MalformedRequest):
        Guarded(adapter).parse(_request(body))


def test_odd_fields_are_unknown_not_refused() -> None:
    event = _event(_dm(dateCreated="yesterday", attachments=[{"guid": 7, "totalBytes": -1}]))
    assert event.occurred_at == 0
    [odd] = event.attachments
    assert odd.file_id == "7" and odd.size is None
