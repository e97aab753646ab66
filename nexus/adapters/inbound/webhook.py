"""Generic webhooks signed per Standard Webhooks (standardwebhooks.com), 5-minute window.

Nexus reads a message from the payload's `data` when it carries one:

    {"type": "message.created", "timestamp": "...",
     "data": {"text": "...", "sender": {"id": "...", "name": "..."},
              "conversation": {"kind": "dm|group|channel", "id": "..."},
              "thread_id": "...", "reply_to": "...", "message_id": "...", "source": "..."}}

Only `text` is required; the sender defaults to "webhook" and the conversation to a direct
one with the sender. Any other payload (say `invoice.paid`) is recorded for hooks to react
to, not answered.
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from typing import Any

from standardwebhooks.webhooks import Webhook

from nexus.adapters.inbound.attachments import attachment, capped, kind_of
from nexus.adapters.inbound.attachments import obj as _obj
from nexus.adapters.inbound.base import (
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
    json_body,
)
from nexus.adapters.inbound.bounds import event_id as bounded_id
from nexus.adapters.inbound.bounds import unix_ms
from nexus.adapters.inbound.signatures import SecretAdapter
from nexus.event import Attachment, Author, Container, ContainerKind, NexusEvent

ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER = (
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
)
TOLERANCE_S = 5 * 60
_KINDS: frozenset[str] = frozenset({"dm", "group", "channel"})


class StandardWebhookAdapter(SecretAdapter):
    name = "webhook"
    configured_by = "NEXUS_WEBHOOK_SECRET"

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        secret = self.configured_secret()
        msg_id = request.header(ID_HEADER)
        stamp = request.header(TIMESTAMP_HEADER)
        given = request.header(SIGNATURE_HEADER)
        if not msg_id or not stamp or not given:
            raise SignatureRejected(
                f"missing {ID_HEADER}, {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}"
            )
        try:
            timestamp = int(stamp)
        except ValueError as error:
            raise SignatureRejected(f"{TIMESTAMP_HEADER} is not a Unix time") from error
        # Checked here against the caller's clock: the library's own verify reads the wall clock.
        if abs(now_ms // 1000 - timestamp) > TOLERANCE_S:
            raise SignatureRejected(f"{TIMESTAMP_HEADER} is outside the {TOLERANCE_S} s window")
        try:
            body = request.body.decode("utf-8")
            expected = Webhook(secret).sign(msg_id, datetime.fromtimestamp(timestamp, UTC), body)
        except (UnicodeDecodeError, ValueError) as error:
            raise SignatureRejected(f"cannot check the signature: {error}") from error
        # Several space-separated signatures may be sent while a secret is being rotated.
        if not any(hmac.compare_digest(s.encode(), expected.encode()) for s in given.split()):
            raise SignatureRejected(f"{SIGNATURE_HEADER} does not match the body")

    def parse(self, request: InboundRequest) -> InboundOutcome:
        msg_id, stamp = request.header(ID_HEADER), request.header(TIMESTAMP_HEADER)
        if not msg_id or not stamp or not stamp.isdigit():
            raise MalformedRequest(f"{ID_HEADER} and a numeric {TIMESTAMP_HEADER} are required")
        payload = json_body(request)
        return InboundOutcome(
            events=(_event(bounded_id("webhook:", msg_id), unix_ms(stamp), payload),)
        )


def _event(event_id: str, occurred_at: int, payload: dict[str, Any]) -> NexusEvent:
    data = _obj(payload.get("data"))
    text = data.get("text") if isinstance(data.get("text"), str) else None
    files = _attachments(data.get("attachments"))
    event = NexusEvent(
        id=event_id, adapter="webhook", platform="webhook", occurred_at=occurred_at, raw=payload
    )
    if (text is None or not text.strip()) and not files:
        kind = payload.get("type", "unknown")
        return event.model_copy(
            update={"kind": "system", "ignore_reason": f"webhook event {kind} (no message text)"}
        )
    sender = _obj(data.get("sender"))
    sender_id = str(sender.get("id") or "webhook")
    conversation = _obj(data.get("conversation"))
    kind = conversation.get("kind", "dm")
    if kind not in _KINDS:
        raise MalformedRequest(f"data.conversation.kind must be one of {sorted(_KINDS)}")
    container_kind: ContainerKind = kind
    return event.model_copy(
        update={
            "space": data.get("source"),
            "sender": Author(id=sender_id, display_name=sender.get("name")),
            "container": Container(
                kind=container_kind, id=str(conversation.get("id") or sender_id)
            ),
            "platform_thread_id": data.get("thread_id"),
            "reply_to": data.get("reply_to"),
            "message_id": data.get("message_id"),
            "text": text if text and text.strip() else None,
            "attachments": files,
        }
    )


def _attachments(given: Any) -> tuple[Attachment, ...]:
    """`data.attachments`: objects with the Attachment's own field names."""
    if not isinstance(given, list):
        return ()
    fields = ("file_id", "url", "mime_type", "name", "size", "width", "height", "duration")
    return capped(
        attachment(
            item.get("kind") or kind_of(item.get("mime_type")),
            **{field: item.get(field) for field in fields},
        )
        for item in given
        if isinstance(item, dict)
    )
