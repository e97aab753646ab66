"""iMessage through a BlueBubbles server's webhooks: `new-message` events become messages.

BlueBubbles signs nothing: it POSTs `{"type": ..., "data": ...}` to the URL it was given,
so the URL itself carries a secret (`?secret=` or `?password=`), or a proxy adds the
`X-BlueBubbles-Secret` header. The secret is compared in constant time with
NEXUS_BLUEBUBBLES_WEBHOOK_SECRET or the server password, NEXUS_BLUEBUBBLES_PASSWORD.
"""

from __future__ import annotations

import hmac
from typing import Any

from nexus.adapters.inbound.attachments import attachment, capped, kind_of, obj
from nexus.adapters.inbound.base import (
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
    json_body,
)
from nexus.adapters.inbound.bounds import event_id as bounded_id
from nexus.event import Attachment, Author, Container, NexusEvent

SECRET_HEADER = "X-BlueBubbles-Secret"  # noqa: S105 - a header name
# Where the webhook URL may carry the secret; BlueBubbles' own API calls it `password`.
SECRET_PARAMS = ("secret", "password")
NEW_MESSAGE = "new-message"
PLATFORM = "imessage"
# chat.style in the Messages database: 43 is a group chat, 45 a conversation with one person.
GROUP_STYLE = 43
# The attachment download converts these to JPEG unless asked for the original, so the
# model is handed a JPEG (HEIC is what an iPhone's camera takes).
_CONVERTED_TO_JPEG = ("image/heic", "image/heif", "image/tiff")


class BlueBubblesAdapter:
    name = "bluebubbles"

    def __init__(self, *secrets: str | None) -> None:
        self._secrets = tuple(s.encode() for s in secrets if s)

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        # No signature and no replay window: a redelivery is deduplicated by the message GUID.
        if not self._secrets:
            raise SignatureRejected(
                "neither NEXUS_BLUEBUBBLES_WEBHOOK_SECRET nor NEXUS_BLUEBUBBLES_PASSWORD is "
                "set: bluebubbles is off"
            )
        given = _given(request)
        if given is None:
            raise SignatureRejected(
                f"missing secret: add ?secret= (or ?password=) to the webhook URL, or the "
                f"{SECRET_HEADER} header"
            )
        # Every configured secret is compared, so the time taken does not tell which matched.
        matched = [hmac.compare_digest(given.encode(), secret) for secret in self._secrets]
        if not any(matched):
            raise SignatureRejected("the webhook secret does not match")

    def parse(self, request: InboundRequest) -> InboundOutcome:
        payload = json_body(request)
        kind = payload.get("type")
        if not isinstance(kind, str):
            raise MalformedRequest('a BlueBubbles webhook needs a string "type"')
        if kind != NEW_MESSAGE:
            # Read receipts, typing, group renames, server notices: nothing to answer or keep.
            return InboundOutcome()
        data = payload.get("data")
        if not isinstance(data, dict):
            raise MalformedRequest('a new-message webhook needs a "data" object')
        return InboundOutcome(events=(message_event(data, payload),))


def _given(request: InboundRequest) -> str | None:
    header = request.header(SECRET_HEADER)
    if header:
        return header
    for param in SECRET_PARAMS:
        value = request.query.get(param)
        if value:
            return value
    return None


def message_event(data: dict[str, Any], payload: dict[str, Any]) -> NexusEvent:
    """One BlueBubbles message (the webhook's `data`, as its MessageSerializer writes it)."""
    guid = data.get("guid")
    if not isinstance(guid, str) or not guid:
        raise MalformedRequest("a BlueBubbles message needs a guid")
    handle = obj(data.get("handle"))
    address = handle.get("address")
    chat = _chat(data.get("chats"))
    event = NexusEvent(
        id=bounded_id("bluebubbles:", guid),
        adapter="bluebubbles",
        platform=PLATFORM,
        sender=Author(id=address) if isinstance(address, str) and address else None,
        container=_container(chat, handle),
        text=_text(data.get("text")),
        attachments=_attachments(data.get("attachments")),
        reply_to=_text(data.get("threadOriginatorGuid")),
        message_id=guid,
        occurred_at=_ms(data.get("dateCreated")),
        raw=payload,
    )
    if data.get("isFromMe") is True:
        # Sent from the Mac's own account: our replies echoed back (their `tempGuid` is the
        # delivery id they were sent under), or the owner typing on another device.
        reason = "sent from this account" + (
            f" (delivery {data['tempGuid']})" if isinstance(data.get("tempGuid"), str) else ""
        )
        return event.model_copy(update={"kind": "bot_echo", "ignore_reason": reason})
    reaction = data.get("associatedMessageType")
    if reaction not in (None, "", "0", 0):
        return event.model_copy(update={"kind": "system", "ignore_reason": f"tapback {reaction}"})
    if data.get("itemType") not in (None, 0):
        # Renames, members added or removed, a group photo changed.
        detail = f"group event (itemType {data.get('itemType')})"
        return event.model_copy(update={"kind": "system", "ignore_reason": detail})
    if event.sender is None:
        raise MalformedRequest("a BlueBubbles message from someone else needs handle.address")
    if event.text is None and not event.attachments:
        return event.model_copy(update={"kind": "unsupported", "ignore_reason": "no text or file"})
    return event


def _chat(chats: Any) -> dict[str, Any]:
    return obj(chats[0]) if isinstance(chats, list) and chats else {}


def _container(chat: dict[str, Any], handle: dict[str, Any]) -> Container | None:
    """The chat by its GUID (`iMessage;+;chat…` a group, `iMessage;-;+1555…` one person):
    the reply goes back to that GUID, whichever it is."""
    chat_guid = chat.get("guid")
    if isinstance(chat_guid, str) and chat_guid:
        group = chat.get("style") == GROUP_STYLE or ";+;" in chat_guid
        return Container(kind="group" if group else "dm", id=chat_guid)
    address, service = handle.get("address"), handle.get("service")
    if isinstance(address, str) and address:
        # No chat in the payload: a 1:1 chat's GUID is the service and the address.
        prefix = service if isinstance(service, str) and service else "iMessage"
        return Container(kind="dm", id=f"{prefix};-;{address}")
    return None


def _attachments(items: Any) -> tuple[Attachment, ...]:
    if not isinstance(items, list):
        return ()
    return capped(_attachment(obj(item)) for item in items)


def _attachment(item: dict[str, Any]) -> Attachment:
    mime = item.get("mimeType")
    if isinstance(mime, str) and mime.lower() in _CONVERTED_TO_JPEG:
        mime = "image/jpeg"
    kind = "sticker" if item.get("isSticker") is True else kind_of(mime)
    return attachment(
        kind,
        file_id=item.get("guid"),  # fetched at turn time from the server, with its password
        mime_type=mime,
        name=item.get("transferName"),
        size=item.get("totalBytes"),
        width=item.get("width") or None,  # 0 when the server could not read the metadata
        height=item.get("height") or None,
    )


def _text(value: Any) -> str | None:
    # An attachment-only message's text is U+FFFC, the object replacement character.
    if not isinstance(value, str):
        return None
    cleaned = value.replace("\ufffc", "")
    return cleaned if cleaned.strip() else None


def _ms(value: Any) -> int:
    """BlueBubbles dates in Unix milliseconds; 0 (unknown) for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**15:
        return value
    return 0
