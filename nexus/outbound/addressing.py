"""Where a reply goes: the inbound delivery context, turned into a sender's target (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nexus.ledger.records import EventRecord

# Adapters that can carry a reply back; each has a sender in nexus.adapters.outbound.
SENDERS = frozenset(
    {"telegram", "slack", "discord", "whatsapp", "twilio", "email", "webhook", "bluebubbles"}
)
SENDERS |= {"gmail"}  # Gmail natively: replies with messages.send in the mail's thread
# Adapters whose reply address reads the platform's raw update (a Discord interaction's
# token, an email's subject and whole Message-ID); the others need the event's columns only.
ADDRESSED_FROM_PAYLOAD = frozenset({"discord", "email"})
ADDRESSED_FROM_PAYLOAD |= {"gmail"}


@dataclass(frozen=True)
class Address:
    sender: str  # the adapter that carries the reply
    format: str  # how it is chunked and marked up: telegram, slack, discord, whatsapp, sms, …
    target: dict[str, Any]  # what the sender needs on every chunk
    reply_to: str | None  # the platform message answered (first chunk only)


def address_for(event: EventRecord, payload: dict[str, Any]) -> Address | None:
    """The reply's address, or None when `event` cannot be answered (no sender, no chat)."""
    if event.adapter not in SENDERS:
        return None
    chat = event.container_id
    if event.adapter == "telegram" and chat:
        thread = event.platform_thread_id
        target: dict[str, Any] = {"chat_id": chat}
        if thread and thread.lstrip("-").isdigit():
            target["message_thread_id"] = int(thread)  # a forum topic
        return Address("telegram", "telegram", target, event.message_id)
    if event.adapter == "slack" and chat:
        # A message in a thread is answered in the thread; Slack has no other reply-to.
        slack = {"channel": chat, "thread_ts": event.platform_thread_id}
        return Address("slack", "slack", _present(slack), None)
    if event.adapter == "discord":
        return _discord(event, payload)
    if event.adapter == "whatsapp" and event.sender_id and event.space:
        target = {"phone_number_id": event.space, "to": event.sender_id}
        return Address("whatsapp", "whatsapp", target, event.message_id)
    if event.adapter == "twilio" and event.sender_id and event.space:
        # Answer from the number (or WhatsApp sender) the person wrote to.
        return Address("twilio", "sms", {"to": event.sender_id, "from": event.space}, None)
    if event.adapter == "email" and event.sender_id:
        subject = str(payload.get("subject") or "").strip()
        reply_subject = subject if subject.lower().startswith("re:") else f"Re: {subject}"
        email = {
            "to": event.sender_id,
            "subject": reply_subject if subject else "Re: your message",
            # The whole Message-ID from the payload where the ledger's column keeps it bounded.
            "in_reply_to": _text(payload.get("message_id")) or event.message_id,
        }
        return Address("email", "email", _present(email), None)
    if event.adapter == "webhook":
        return Address("webhook", "webhook", {"in_reply_to": event.id}, None)
    if event.adapter == "gmail" and event.sender_id:
        return _gmail(event, payload)
    if event.adapter == "bluebubbles" and chat:
        # The chat GUID, a group's or one person's; an inline reply would need the Private API.
        return Address("bluebubbles", "imessage", {"chat_guid": chat}, None)
    return None


def _discord(event: EventRecord, payload: dict[str, Any]) -> Address | None:
    token, application = payload.get("token"), payload.get("application_id")
    if isinstance(token, str) and application:
        # A slash command was answered "thinking…" at once; the reply edits that message
        # and any further chunks follow it up (valid for 15 minutes).
        interaction = {"application_id": str(application), "token": token}
        return Address("discord", "discord", {"interaction": interaction}, None)
    channel = event.platform_thread_id or event.container_id
    if not channel:
        return None
    return Address("discord", "discord", {"channel_id": channel}, event.message_id)


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# References keeps the thread's ids; a long thread's list is cut to its first and last ones
# (RFC 5322 3.6.4 allows it), so the header stays a sane length.
MAX_REFERENCES = 20


def _gmail(event: EventRecord, payload: dict[str, Any]) -> Address:
    """A reply in the Gmail thread: threadId for Gmail, In-Reply-To and References for
    every other client (Gmail threads by them and the subject too)."""
    subject = str(payload.get("subject") or "").strip()
    reply_subject = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    original = _text(payload.get("message_id")) or event.message_id
    headers = payload.get("headers")
    earlier = headers.get("references") if isinstance(headers, dict) else None
    references = (earlier.split() if isinstance(earlier, str) else []) + (
        [f"<{original.strip('<>')}>"] if original else []
    )
    if len(references) > MAX_REFERENCES:
        references = [references[0], *references[-(MAX_REFERENCES - 1) :]]
    target = {
        "to": event.sender_id,
        "subject": reply_subject if subject else "Re: your message",
        "in_reply_to": original,
        "references": " ".join(references) or None,
        "thread_id": event.platform_thread_id,
    }
    return Address("gmail", "email", _present(target), None)
