"""WhatsApp Cloud API: a real signed notification, the hub handshake, messages and statuses."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.whatsapp import WhatsAppAdapter
from nexus.event import NexusEvent

# pywa's test vector: a body Meta signed with an app secret since reset.
VECTOR_SECRET = "1222e786b144d0e85b9f365372d93676"
VECTOR_SIGNATURE = "sha256=54edfa1d7259e0eb13c677cc7d73d1b5c86cfa12433d19156e058ab9251bc441"
VECTOR_BODY = (
    b'{"object":"whatsapp_business_account","entry":[{"id":"264937493375603","changes":[{"'
    b'value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"155509538'
    b'77","phone_number_id":"277321005464405"},"contacts":[{"profile":{"name":"PyWa Tests"'
    b'},"wa_id":"972544401243"}],"messages":[{"from":"972544401243","id":"wamid.HBgMOTcyNT'
    b'Q0NDAxMjQzFQIAEhggM0RFQTNCMEEwRTY3QzUwODYzMDc4NjQ4QzM4ODAxM0YA","timestamp":"1730231'
    b'903","text":{"body":"Hey there! I am using PyWa."},"type":"text"}]},"field":"message'
    b's"}]}]}'
)
SECRET = "app-secret"
adapter = WhatsAppAdapter(SECRET, "verify-me")


def _post(body: bytes, signature: str | None = None, secret: str = SECRET) -> InboundRequest:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {"x-hub-signature-256": signature or f"sha256={digest}"}
    return InboundRequest(method="POST", url="https://x", headers=headers, body=body)


def _notification(value: dict[str, Any]) -> dict[str, Any]:
    base = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "972123456789", "phone_number_id": "1122334455667"},
        "contacts": [{"profile": {"name": "Test Name"}, "wa_id": "972987654321"}],
    }
    change = {"value": {**base, **value}, "field": "messages"}
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "1234567890987654321", "changes": [change]}],
    }


def _events(value: dict[str, Any]) -> tuple[NexusEvent, ...]:
    request = _post(json.dumps(_notification(value)).encode())
    adapter.verify(request, now_ms=0)
    return adapter.parse(request).events


def _message(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "messages": [
            {
                "from": "972987654321",
                "id": "wamid.xyzxyz",
                "timestamp": "1697043379",
                "type": kind,
                **fields,
            }
        ]
    }


def test_the_real_signed_body_verifies_and_parses() -> None:
    signed = WhatsAppAdapter(VECTOR_SECRET, None)
    request = InboundRequest(
        "POST", "https://x", {"x-hub-signature-256": VECTOR_SIGNATURE}, VECTOR_BODY
    )
    signed.verify(request, now_ms=0)
    events = signed.parse(request).events
    assert len(events) == 1 and events[0].id.startswith("whatsapp:wamid.")
    assert events[0].routable and events[0].text


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (_post(VECTOR_BODY + b" ", VECTOR_SIGNATURE), "does not match"),
        (_post(VECTOR_BODY, secret="wrong"), "does not match"),
        (InboundRequest("POST", "https://x", {}, VECTOR_BODY), "missing"),
    ],
)
def test_bad_signatures_are_401(request_: InboundRequest, reason: str) -> None:
    with pytest.raises(SignatureRejected, match=reason):
        WhatsAppAdapter(VECTOR_SECRET, None).verify(request_, now_ms=0)


def test_no_secret_means_whatsapp_is_off() -> None:
    with pytest.raises(SignatureRejected, match="NEXUS_WHATSAPP_APP_SECRET"):
        WhatsAppAdapter(None, None).verify(_post(b"{}"), now_ms=0)


def _handshake(token: str, **query: str) -> InboundRequest:
    params = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": "1158201444"}
    return InboundRequest("GET", "https://x", {}, b"", {**params, **query})


def test_the_hub_handshake_echoes_the_challenge_as_text() -> None:
    request = _handshake("verify-me")
    adapter.verify(request, now_ms=0)
    answer = adapter.parse(request).answer
    assert answer is not None and (answer.body, answer.media_type) == ("1158201444", "text/plain")
    with pytest.raises(SignatureRejected, match="does not match"):
        adapter.verify(_handshake("guess"), now_ms=0)
    with pytest.raises(SignatureRejected, match="NEXUS_WHATSAPP_VERIFY_TOKEN"):
        WhatsAppAdapter(SECRET, None).verify(_handshake("verify-me"), now_ms=0)
    with pytest.raises(MalformedRequest):
        adapter.parse(_handshake("verify-me", **{"hub.mode": "unsubscribe"}))


def test_a_text_message() -> None:
    (event,) = _events(_message("text", text={"body": "Hello"}))
    assert event.id == "whatsapp:wamid.xyzxyz" and event.routable and event.text == "Hello"
    assert event.space == "1122334455667" and event.occurred_at == 1697043379000
    assert event.container is not None and event.container.kind == "dm"
    assert event.sender is not None and event.sender.display_name == "Test Name"


def test_an_image_with_a_caption_and_a_reply() -> None:
    image = {"mime_type": "image/jpeg", "sha256": "4654+8g=", "id": "65463453", "caption": "look"}
    (event,) = _events(_message("image", image=image, context={"from": "1", "id": "wamid.prev"}))
    assert event.text == "look" and event.reply_to == "wamid.prev"
    assert event.attachments[0].model_dump(exclude_none=True) == {
        "kind": "image",
        "file_id": "65463453",
        "mime_type": "image/jpeg",
    }


def test_buttons_are_callbacks_reactions_and_unknown_types_are_recorded_only() -> None:
    (button,) = _events(
        _message(
            "interactive",
            interactive={
                "type": "button_reply",
                "button_reply": {"id": "callback_data", "title": "title"},
            },
        )
    )
    (reaction,) = _events(_message("reaction", reaction={"message_id": "w", "emoji": "\U0001f62e"}))
    (odd,) = _events(_message("unsupported", errors=[{"code": 131051}]))
    assert (button.kind, button.text, button.routable) == ("callback", "callback_data", True)
    assert (reaction.kind, reaction.routable) == ("system", False)
    assert (odd.kind, odd.routable) == ("unsupported", False)


def test_statuses_are_recorded_each_under_its_own_id() -> None:
    statuses = [
        {"id": "wamid.out", "status": "sent", "timestamp": "1", "recipient_id": "972987654321"},
        {
            "id": "wamid.out",
            "status": "failed",
            "timestamp": "2",
            "recipient_id": "972987654321",
            "errors": [{"code": 130472, "title": "User's number is part of an experiment"}],
        },
    ]
    sent, failed = _events({"statuses": statuses})
    assert (sent.id, failed.id) == (
        "whatsapp:status:wamid.out:sent",
        "whatsapp:status:wamid.out:failed",
    )
    assert sent.kind == failed.kind == "status" and not failed.routable
    assert failed.ignore_reason is not None and "experiment" in failed.ignore_reason


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"object": "page", "entry": []}',
        b"{",
        json.dumps(_notification(_message("text", id=None))).encode(),
    ],
)
def test_malformed_notifications_are_400(body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        adapter.parse(_post(body))
