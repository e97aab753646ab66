"""Gmail natively: the Cloud Pub/Sub push that says a mailbox changed, and a Gmail API
message (`users.messages.get`, format=raw) as an event.

The push carries no mail: `message.data` is base64 JSON `{"emailAddress", "historyId"}`.
It is recorded (never a turn) and rings the mailbox's sync (nexus/ingest/gmail.py), which
reads the history and stores each message through `message_event`.

Authentication: the push endpoint's URL carries a shared secret, `?token=`, compared in
constant time with NEXUS_GMAIL_PUSH_TOKEN. (Pub/Sub can also sign pushes with an OIDC
token; verifying it needs Google's certificates and a JWT library, left for later.)
"""

from __future__ import annotations

import base64
import binascii
import hmac
from datetime import datetime
from email.utils import parseaddr
from typing import Any

from nexus.adapters.inbound.base import (
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
    json_body,
)
from nexus.adapters.inbound.bounds import event_id, load_json
from nexus.adapters.inbound.email import rfc822_event
from nexus.event import NexusEvent

TOKEN_PARAMETER = "token"  # noqa: S105 - the query parameter's name
# Labels on mail this mailbox wrote itself: answering it would talk to ourselves.
OWN_LABELS = frozenset({"SENT", "DRAFT"})


class GmailPushAdapter:
    name = "gmail"

    def __init__(self, token: str | None, mailbox: str | None) -> None:
        self._token = token
        self._mailbox = mailbox.strip().lower() if mailbox else None

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        if not self._token:
            raise SignatureRejected("NEXUS_GMAIL_PUSH_TOKEN is not set: Gmail push is off")
        given = request.query.get(TOKEN_PARAMETER)
        if not given:
            raise SignatureRejected(
                f"missing ?{TOKEN_PARAMETER}= in the push endpoint URL (see docs/adapters.md)"
            )
        if not hmac.compare_digest(given.encode(), self._token.encode()):
            raise SignatureRejected(f"the push endpoint's ?{TOKEN_PARAMETER}= does not match")

    def parse(self, request: InboundRequest) -> InboundOutcome:
        return InboundOutcome(events=(push_event(json_body(request), self._mailbox),))


def push_event(envelope: dict[str, Any], mailbox: str | None) -> NexusEvent:
    """A Pub/Sub push envelope as its record: a system event, never a turn."""
    message = envelope.get("message")
    if not isinstance(message, dict):
        raise MalformedRequest("a Pub/Sub push needs a message object")
    # Pub/Sub sends both spellings; either names the delivery, so a redelivery is known.
    push_id = message.get("messageId") or message.get("message_id")
    if not isinstance(push_id, str | int) or isinstance(push_id, bool) or push_id == "":
        raise MalformedRequest("a Pub/Sub push needs message.messageId")
    notice = _notification(message.get("data"))
    address = notice.get("emailAddress")
    history = notice.get("historyId")
    if not isinstance(address, str) or not isinstance(history, str | int):
        raise MalformedRequest("a Gmail notification needs emailAddress and historyId")
    address = address.strip().lower()
    ours = mailbox is not None and address == mailbox
    reason = (
        f"gmail push: {address} changed (history {history})"
        if ours
        else f"gmail push for {address}, not the configured mailbox: not read"
    )
    return NexusEvent(
        id=event_id("gmail:push:", str(push_id)),
        adapter="gmail",
        platform="email",
        kind="system",
        ignore_reason=reason,
        occurred_at=_rfc3339_ms(message.get("publishTime") or message.get("publish_time")),
        raw={
            "subscription": envelope.get("subscription"),
            "message_id": str(push_id),
            "email_address": address,
            "history_id": str(history),
        },
    )


def _notification(data: Any) -> dict[str, Any]:
    if not isinstance(data, str) or not data:
        raise MalformedRequest("a Gmail push needs message.data (base64 JSON)")
    padded = data + "=" * (-len(data) % 4)
    try:
        decoded = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError) as error:
        raise MalformedRequest("message.data is not base64") from error
    notice = load_json(decoded, "message.data")
    if not isinstance(notice, dict):
        raise MalformedRequest("message.data is not a JSON object")
    return notice


def _rfc3339_ms(value: Any) -> int:
    if not isinstance(value, str):
        return 0
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, OverflowError):
        return 0


def message_event(resource: dict[str, Any], mailbox: str) -> NexusEvent:
    """A `users.messages.get` answer (format=raw) as the event `gmail:<message id>`."""
    gmail_id, raw = resource.get("id"), resource.get("raw")
    if not isinstance(gmail_id, str) or not gmail_id or not isinstance(raw, str):
        raise MalformedRequest("a Gmail message (format=raw) needs a string id and raw")
    try:
        body = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except (binascii.Error, ValueError) as error:
        raise MalformedRequest("the Gmail message's raw is not base64url") from error
    labels = resource.get("labelIds")
    labels = (
        [label for label in labels if isinstance(label, str)] if isinstance(labels, list) else []
    )
    thread = resource.get("threadId")
    internal = str(resource.get("internalDate", ""))
    # internalDate is when Gmail received it: unlike Date, the sender cannot set it.
    received = (
        int(internal) if internal.isascii() and internal.isdigit() and len(internal) < 16 else None
    )
    event = rfc822_event(
        body,
        event_id=event_id("gmail:", gmail_id),
        adapter="gmail",
        thread=str(thread) if isinstance(thread, str | int) and thread != "" else None,
        occurred_at=received,
        extra={
            "id": gmail_id,
            "threadId": thread,
            "labelIds": labels,
            "historyId": resource.get("historyId"),
        },
    )
    own = next((label for label in labels if label in OWN_LABELS), None)
    sender = parseaddr(event.raw.get("headers", {}).get("from", ""))[1].strip().lower()
    if own is not None or sender == mailbox.strip().lower():
        why = f"label {own}" if own else f"From {sender}"
        return event.model_copy(
            update={"kind": "bot_echo", "ignore_reason": f"written by this mailbox ({why})"}
        )
    return event


def unreadable_event(message_id: str, reason: str) -> NexusEvent:
    """A message Nexus cannot read, recorded as such (never a turn): the mailbox's sync
    moves past it rather than stopping on it for good."""
    return NexusEvent(
        id=event_id("gmail:", message_id),
        adapter="gmail",
        platform="email",
        kind="unsupported",
        ignore_reason=f"unreadable Gmail message: {reason[:300]}",
        occurred_at=0,
        raw={"id": message_id},
    )
