"""Email through the operator's relay: raw RFC 822 or Gmail API JSON, HMAC-signed by Nexus."""

from __future__ import annotations

import hashlib
import hmac
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import getaddresses, parseaddr
from typing import Any

from nexus.adapters.inbound.base import (
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
)
from nexus.adapters.inbound.bounds import event_id, load_json
from nexus.adapters.inbound.email_mime import (
    date_ms,
    gmail_headers,
    gmail_parts,
    header_map,
    html_to_text,
    is_auto_reply,
    message_id,
    mime_attachments,
    readable_body,
    strip_quoted,
    thread_root,
    without_attachment_bytes,
)
from nexus.adapters.inbound.signatures import SecretAdapter
from nexus.event import Attachment, Author, Container, EventKind, NexusEvent

# Mail has no webhook of its own: a relay the operator runs (an MTA pipe, a Gmail push
# worker) posts it, so Nexus defines the signature, Stripe-style. `X-Nexus-Signature` is
# `v1=<hex HMAC-SHA256(NEXUS_WEBHOOK_SECRET, "<timestamp>." + body)>`, comma-separated when
# several secrets are live during a rotation; the timestamp bounds replays to five minutes.
TIMESTAMP_HEADER = "X-Nexus-Timestamp"
SIGNATURE_HEADER = "X-Nexus-Signature"
TOLERANCE_S = 300
# Headers kept in an RFC 822 event's raw: enough to thread, answer and audit, not the
# Received/DKIM chain (which can run to kilobytes and says nothing about the message).
_KEPT_HEADERS = (
    "from", "to", "cc", "reply-to", "delivered-to", "subject", "date", "message-id",
    "in-reply-to", "references", "auto-submitted", "precedence", "content-type",
)  # fmt: skip
# Gmail labels on mail this mailbox itself wrote: answering them would talk to ourselves.
_OWN_LABELS = ("SENT", "DRAFT")
MAX_HEADER_CHARS = 998  # RFC 5322's line limit: no real Message-ID is longer


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The X-Nexus-Signature value for `body` sent at `timestamp` (Unix seconds)."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"v1={digest.hexdigest()}"


class EmailAdapter(SecretAdapter):
    name = "email"
    configured_by = "NEXUS_WEBHOOK_SECRET"

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        secret = self.configured_secret()
        stamp, given = request.header(TIMESTAMP_HEADER), request.header(SIGNATURE_HEADER)
        if not stamp or not given:
            raise SignatureRejected(f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER} header")
        stamp = stamp.strip()
        # int() alone would also take "+1_700_000_000": only plain digits are a timestamp.
        if not (stamp.isascii() and stamp.isdigit()):
            raise SignatureRejected(f"{TIMESTAMP_HEADER} is not a Unix time in seconds")
        timestamp = int(stamp)
        if abs(now_ms // 1000 - timestamp) > TOLERANCE_S:
            raise SignatureRejected(f"{TIMESTAMP_HEADER} is outside the {TOLERANCE_S} s window")
        expected = sign(secret, timestamp, request.body).encode()
        # Every offered value is compared, so a relay can send old and new during rotation.
        offered = [part.strip().encode() for part in given.split(",")]
        if not any(hmac.compare_digest(candidate, expected) for candidate in offered):
            raise SignatureRejected(f"{SIGNATURE_HEADER} does not match the body")

    def parse(self, request: InboundRequest) -> InboundOutcome:
        content_type = (request.header("content-type") or "").strip().lower()
        if content_type.startswith("application/json"):
            return InboundOutcome(events=(_from_json(request.body),))
        return InboundOutcome(events=(_from_rfc822(request.body),))


def _from_rfc822(body: bytes) -> NexusEvent:
    return rfc822_event(body)


def rfc822_event(
    body: bytes,
    *,
    event_id: str | None = None,
    adapter: str = "email",
    thread: str | None = None,
    occurred_at: int | None = None,
    extra: dict[str, Any] | None = None,
) -> NexusEvent:
    """An RFC 822 message as an event. By default keyed by its Message-ID, threaded by its
    References and dated by its Date; a mailbox API that knows better (Gmail's message id,
    thread id and received time) passes its own, and `extra` fields for the raw record."""
    if not body.strip():
        raise MalformedRequest("the body is empty: expected an RFC 822 message")
    message = message_from_bytes(body, policy=policy.default)
    assert isinstance(message, EmailMessage)  # policy.default builds EmailMessage
    headers = header_map(message)
    own_id = message_id(headers.get("message-id"))
    if event_id is None:
        if own_id is None:
            raise MalformedRequest("an email needs a Message-ID: it is how a redelivery is known")
        event_id = _event_id("", own_id)
    text = strip_quoted(readable_body(message))
    attachments = mime_attachments(message)
    event = _event(
        event_id=event_id,
        adapter=adapter,
        headers=headers,
        text=text,
        thread=thread or thread_root(headers.get("references"), headers.get("in-reply-to")),
        occurred_at=occurred_at if occurred_at is not None else date_ms(headers.get("date")),
        attachments=attachments,
        # Never the MIME bytes themselves: attachments can be megabytes.
        raw={
            **(extra or {}),
            "headers": {k: headers[k] for k in _KEPT_HEADERS if k in headers},
            "text": text,
            "attachments": [a.model_dump(exclude_none=True) for a in attachments],
        },
    )
    if (
        message.get_content_type() == "multipart/report"
        and str(message.get_param("report-type", "")).lower() == "delivery-status"
    ):
        return _ignored(event, "status", "delivery status notification")
    return _checked(event, headers)


def _from_json(body: bytes) -> NexusEvent:
    payload = load_json(body)
    if not isinstance(payload, dict):
        raise MalformedRequest("a Gmail message or push notification is a JSON object")
    if "subscription" in payload and isinstance(payload.get("message"), dict):
        return _push_event(payload)
    gmail_id, tree = payload.get("id"), payload.get("payload")
    if not isinstance(gmail_id, str) or not gmail_id or not isinstance(tree, dict):
        raise MalformedRequest("a Gmail API message needs a string id and a payload object")
    headers = gmail_headers(tree)
    plain, html, attachments = gmail_parts(tree)
    internal = str(payload.get("internalDate", ""))
    # internalDate is when Gmail received it: unlike Date, the sender cannot set it.
    readable = internal.isascii() and internal.isdigit() and len(internal) < 16
    received = int(internal) if readable else None
    event = _event(
        event_id=_event_id("gmail:", gmail_id),
        headers=headers,
        text=strip_quoted(plain if plain is not None else html_to_text(html or "")),
        thread=str(payload["threadId"]) if payload.get("threadId") else None,
        occurred_at=received if received is not None else date_ms(headers.get("date")),
        attachments=attachments,
        raw={**payload, "payload": without_attachment_bytes(tree)},
    )
    labels = payload.get("labelIds")
    own = [label for label in _OWN_LABELS if isinstance(labels, list) and label in labels]
    if own:
        return _ignored(event, "bot_echo", f"written by this mailbox (label {own[0]})")
    return _checked(event, headers)


def _push_event(payload: dict[str, Any]) -> NexusEvent:
    # Gmail's Pub/Sub push says only "the mailbox changed": the relay must fetch history.
    push_id = payload["message"].get("messageId")
    if not isinstance(push_id, str | int) or push_id == "":
        raise MalformedRequest("a Pub/Sub push needs message.messageId")
    event = NexusEvent(
        id=_event_id("push:", str(push_id)),
        adapter="email",
        platform="email",
        occurred_at=0,
        raw=payload,
    )
    return _ignored(event, "system", "gmail push notification: fetch history")


def _event_id(kind: str, provider_id: str) -> str:
    # A Message-ID may run to 998 characters, the ledger key to 255: hash the rare long one
    # rather than refuse the mail, so a redelivery still lands on the same key.
    return event_id(f"email:{kind}", provider_id)


def _event(
    *,
    event_id: str,
    adapter: str = "email",
    headers: dict[str, str],
    text: str,
    thread: str | None,
    occurred_at: int,
    attachments: tuple[Attachment, ...],
    raw: dict[str, Any],
) -> NexusEvent:
    name, address = parseaddr(headers.get("from", ""))
    address = address.strip().lower()
    # The mailbox it came to: Delivered-To is the real envelope recipient, To may be a list.
    to = getaddresses([headers.get("delivered-to") or headers.get("to", "")])
    return NexusEvent(
        id=event_id,
        adapter=adapter,
        platform="email",
        space=to[0][1].lower() if to and to[0][1] else None,
        # Email has no groups in this model: every sender is their own conversation.
        sender=Author(id=address, display_name=name or None) if address else None,
        container=Container(kind="dm", id=address) if address else None,
        platform_thread_id=thread,
        text=text or None,
        attachments=attachments,
        reply_to=message_id(headers.get("in-reply-to")),
        message_id=message_id(headers.get("message-id")),
        occurred_at=occurred_at,
        # The whole Message-ID: the ledger's column keeps a bounded form of a long one, and a
        # reply must name the original exactly to thread (RFC 5322 lines stop at 998).
        raw={**raw, "subject": headers.get("subject"), "message_id": _whole_id(headers)},
    )


def _checked(event: NexusEvent, headers: dict[str, str]) -> NexusEvent:
    machine = is_auto_reply(headers)
    if machine is not None:
        sender = event.sender.model_copy(update={"is_bot": True}) if event.sender else None
        return _ignored(event.model_copy(update={"sender": sender}), "bot_echo", machine)
    if event.sender is None:
        return _ignored(event, "unsupported", "no sender address")
    if event.text is None and not event.attachments:
        return _ignored(event, "unsupported", "no text or attachments")
    return event


def _ignored(event: NexusEvent, kind: EventKind, reason: str) -> NexusEvent:
    return event.model_copy(update={"kind": kind, "ignore_reason": reason})


def _whole_id(headers: dict[str, str]) -> str | None:
    found = message_id(headers.get("message-id"))
    return found[:MAX_HEADER_CHARS] if found else None
