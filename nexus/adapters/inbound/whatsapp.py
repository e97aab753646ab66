"""WhatsApp Cloud API: the hub challenge (GET) and signed notifications (POST)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

from nexus.adapters.inbound.attachments import attachment
from nexus.adapters.inbound.attachments import obj as _obj
from nexus.adapters.inbound.base import (
    ImmediateAnswer,
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
    json_body,
)
from nexus.adapters.inbound.bounds import event_id as bounded_id
from nexus.adapters.inbound.bounds import unix_ms
from nexus.adapters.inbound.signatures import SecretAdapter, check_sha256_signature
from nexus.event import Author, Container, NexusEvent

SIGNATURE_HEADER = "X-Hub-Signature-256"
_MEDIA = ("image", "video", "audio", "document", "sticker")


class WhatsAppAdapter(SecretAdapter):
    name = "whatsapp"
    configured_by = "NEXUS_WHATSAPP_APP_SECRET"

    def __init__(self, app_secret: str | None, verify_token: str | None) -> None:
        super().__init__(app_secret)
        self._verify_token = verify_token

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        # Meta defines no replay window; a notification is deduplicated by its wamid instead.
        if request.method == "GET":
            self._verify_handshake(request)
            return
        check_sha256_signature(request, self.configured_secret(), SIGNATURE_HEADER)

    def _verify_handshake(self, request: InboundRequest) -> None:
        if not self._verify_token:
            raise SignatureRejected("NEXUS_WHATSAPP_VERIFY_TOKEN is not set: cannot subscribe")
        given = request.query.get("hub.verify_token", "")
        if not hmac.compare_digest(given.encode(), self._verify_token.encode()):
            raise SignatureRejected("hub.verify_token does not match NEXUS_WHATSAPP_VERIFY_TOKEN")

    def parse(self, request: InboundRequest) -> InboundOutcome:
        if request.method == "GET":
            if request.query.get("hub.mode") != "subscribe" or "hub.challenge" not in request.query:
                raise MalformedRequest("a handshake needs hub.mode=subscribe and hub.challenge")
            return InboundOutcome(
                answer=ImmediateAnswer(request.query["hub.challenge"], media_type="text/plain")
            )
        payload = json_body(request)
        if payload.get("object") != "whatsapp_business_account" or not isinstance(
            payload.get("entry"), list
        ):
            raise MalformedRequest("not a WhatsApp Business Account notification")
        events = tuple(_events(payload))
        # Account, template or quality updates carry no message or status: recorded all the
        # same (nothing acknowledged is dropped), under a digest of the signed bytes.
        return InboundOutcome(events=events or (_notification(request.body, payload),))


def _events(payload: dict[str, Any]) -> Iterator[NexusEvent]:
    """One event per message and per status: a notification may batch several of each."""
    for entry in payload["entry"]:
        for change in _obj(entry).get("changes") or []:
            value = _obj(_obj(change).get("value"))
            space = _obj(value.get("metadata")).get("phone_number_id")
            names = {
                c.get("wa_id"): _obj(c.get("profile")).get("name")
                for c in value.get("contacts") or []
                if isinstance(c, dict)
            }
            for message in value.get("messages") or []:
                yield _message(_obj(message), space, names, payload)
            for status in value.get("statuses") or []:
                yield _status(_obj(status), space, payload)


def _message(
    message: dict[str, Any], space: str | None, names: dict[Any, Any], payload: dict[str, Any]
) -> NexusEvent:
    wamid, sender = message.get("id"), message.get("from")
    if not isinstance(wamid, str) or not isinstance(sender, str):
        raise MalformedRequest("a WhatsApp message needs an id and a from")
    kind = str(message.get("type"))
    event = NexusEvent(
        id=bounded_id("whatsapp:", wamid),
        adapter="whatsapp",
        platform="whatsapp",
        space=space,
        sender=Author(id=sender, display_name=names.get(sender)),
        container=Container(kind="dm", id=sender),
        reply_to=_obj(message.get("context")).get("id"),
        message_id=wamid,
        occurred_at=unix_ms(message.get("timestamp")),
        raw=payload,
    )
    if kind == "text":
        return event.model_copy(update={"text": _obj(message.get("text")).get("body")})
    if kind in _MEDIA:
        media = _obj(message.get(kind))
        # Only a media id: its URL comes from the Graph API, with the access token.
        found = attachment(
            "voice" if kind == "audio" and media.get("voice") is True else kind,
            file_id=media.get("id"),
            mime_type=media.get("mime_type"),
            name=media.get("filename"),
        )
        return event.model_copy(update={"text": media.get("caption"), "attachments": (found,)})
    if kind in ("interactive", "button"):
        return event.model_copy(update={"kind": "callback", "text": _choice(message, kind)})
    if kind == "reaction":
        emoji = _obj(message.get("reaction")).get("emoji")
        return event.model_copy(update={"kind": "system", "ignore_reason": f"reaction {emoji}"})
    return event.model_copy(
        update={"kind": "unsupported", "ignore_reason": f"message type {kind} is not handled"}
    )


def _choice(message: dict[str, Any], kind: str) -> str | None:
    """What the user picked: a reply button, a list row, or a template quick reply."""
    if kind == "button":
        button = _obj(message.get("button"))
        return button.get("text") or button.get("payload")
    # A reply button or a list row: its id is the value Nexus gave the choice (the title is
    # only what the person saw), as a pressed button's value is on every other platform.
    interactive = _obj(message.get("interactive"))
    picked = _obj(interactive.get(str(interactive.get("type"))))
    return picked.get("id") or picked.get("title")


def _status(status: dict[str, Any], space: str | None, payload: dict[str, Any]) -> NexusEvent:
    wamid, state = status.get("id"), status.get("status")
    if not isinstance(wamid, str) or not isinstance(state, str):
        raise MalformedRequest("a WhatsApp status needs an id and a status")
    errors = [str(_obj(e).get("title") or _obj(e).get("code")) for e in status.get("errors") or []]
    reason = f"delivery status {state}" + (f": {'; '.join(errors)}" if errors else "")
    recipient = status.get("recipient_id")
    return NexusEvent(
        id=bounded_id("whatsapp:status:", f"{wamid}:{state}"),
        adapter="whatsapp",
        platform="whatsapp",
        kind="status",
        space=space,
        container=Container(kind="dm", id=str(recipient)) if recipient else None,
        message_id=wamid,
        occurred_at=unix_ms(status.get("timestamp")),
        raw=payload,
        ignore_reason=reason,
        delivery_status=state,
    )


def _notification(body: bytes, payload: dict[str, Any]) -> NexusEvent:
    fields = sorted(
        str(_obj(change).get("field"))
        for entry in payload["entry"]
        for change in _obj(entry).get("changes") or []
    )
    return NexusEvent(
        id=f"whatsapp:notification:sha256-{hashlib.sha256(body).hexdigest()[:32]}",
        adapter="whatsapp",
        platform="whatsapp",
        kind="system",
        occurred_at=0,
        raw=payload,
        ignore_reason=f"notification without messages or statuses ({', '.join(fields) or 'empty'})",
    )
