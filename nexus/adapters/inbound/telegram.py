"""Telegram Bot API webhooks: secret-token header, one Update per request."""

from __future__ import annotations

import hmac
from typing import Any

from nexus.adapters.inbound.attachments import attachment, capped, obj
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
from nexus.adapters.inbound.signatures import SecretAdapter, required_header
from nexus.event import Attachment, Author, Container, ContainerKind, NexusEvent

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name

_CONTAINER_KINDS: dict[str, ContainerKind] = {
    "private": "dm",
    "group": "group",
    "supergroup": "group",
    "channel": "channel",
}
# Attachment-bearing fields of a Message and the kind each is recorded as; photos come as
# several sizes, largest last. A round video note is square: `length` is its side.
_MEDIA = {
    "voice": "voice", "audio": "audio", "document": "document", "video": "video",
    "video_note": "video", "animation": "video", "sticker": "sticker", "story": "story",
}  # fmt: skip
# Service messages: facts about the chat, not something anyone said to the bot.
_SERVICE = (
    "forum_topic_created", "forum_topic_edited", "forum_topic_closed", "forum_topic_reopened",
    "new_chat_members", "left_chat_member", "new_chat_title", "new_chat_photo",
    "delete_chat_photo", "group_chat_created", "supergroup_chat_created",
    "migrate_to_chat_id", "migrate_from_chat_id", "pinned_message",
)  # fmt: skip


class TelegramAdapter(SecretAdapter):
    name = "telegram"
    configured_by = "NEXUS_TELEGRAM_SECRET_TOKEN"

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        # Telegram signs nothing; it echoes the secret given to setWebhook in a header.
        secret = self.configured_secret()
        given = required_header(request, SECRET_HEADER)
        if not hmac.compare_digest(given.encode(), secret.encode()):
            raise SignatureRejected(f"{SECRET_HEADER} does not match")

    def parse(self, request: InboundRequest) -> InboundOutcome:
        update = json_body(request)
        update_id = update.get("update_id")
        # bool is an int to Python, but `true` is not an update_id.
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            raise MalformedRequest("a Telegram Update needs an integer update_id")
        event_id = bounded_id("telegram:", str(update_id))
        for field in ("message", "channel_post"):
            if isinstance(update.get(field), dict):
                return InboundOutcome(events=(_message_event(event_id, update, update[field]),))
        for field in ("edited_message", "edited_channel_post"):
            if isinstance(update.get(field), dict):
                edited = _message_event(event_id, update, update[field])
                return InboundOutcome(
                    events=(
                        edited.model_copy(
                            update={"kind": "edit", "ignore_reason": "edits are not answered"}
                        ),
                    )
                )
        if isinstance(update.get("callback_query"), dict):
            return InboundOutcome(
                events=(_callback_event(event_id, update),),
                answer=_callback_answer(update["callback_query"]),
            )
        kinds = sorted(key for key in update if key != "update_id")
        return InboundOutcome(
            events=(
                NexusEvent(
                    id=event_id,
                    adapter=self.name,
                    platform=self.name,
                    kind="unsupported",
                    occurred_at=0,
                    raw=update,
                    ignore_reason=f"update type {', '.join(kinds) or 'empty'} is not handled",
                ),
            )
        )


def _sender(user: Any) -> Author | None:
    if not isinstance(user, dict) or "id" not in user:
        return None
    name = " ".join(p for p in (user.get("first_name"), user.get("last_name")) if p)
    return Author(
        id=str(user["id"]),
        display_name=name or user.get("username"),
        is_bot=bool(user.get("is_bot", False)),
    )


def _container(chat: Any) -> Container | None:
    if not isinstance(chat, dict) or "id" not in chat:
        return None
    kind = _CONTAINER_KINDS.get(str(chat.get("type")), "group")
    return Container(kind=kind, id=str(chat["id"]))


def _attachments(message: dict[str, Any]) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    photos = message.get("photo")
    if isinstance(photos, list) and photos:
        largest = obj(photos[-1])  # the sizes come smallest first
        found.append(
            attachment(
                "image",
                file_id=largest.get("file_id"),
                mime_type="image/jpeg",  # Telegram re-encodes every photo as a JPEG
                size=largest.get("file_size"),
                width=largest.get("width"),
                height=largest.get("height"),
            )
        )
    for field, kind in _MEDIA.items():
        media = message.get(field)
        if isinstance(media, dict):
            found.append(
                attachment(
                    kind,
                    file_id=media.get("file_id") or media.get("id"),
                    mime_type=media.get("mime_type"),
                    name=media.get("file_name"),
                    size=media.get("file_size"),
                    width=media.get("width") or media.get("length"),
                    height=media.get("height") or media.get("length"),
                    duration=media.get("duration"),
                )
            )
    return capped(found)


def _message_event(event_id: str, update: dict[str, Any], message: dict[str, Any]) -> NexusEvent:
    sender = _sender(message.get("from"))
    reply = message.get("reply_to_message")
    # message_thread_id is also set on plain reply threads; only a forum topic is a thread.
    topic = message.get("message_thread_id") if message.get("is_topic_message") else None
    event = NexusEvent(
        id=event_id,
        adapter="telegram",
        platform="telegram",
        sender=sender,
        container=_container(message.get("chat")),
        platform_thread_id=str(topic) if topic is not None else None,
        text=message.get("text") or message.get("caption"),
        attachments=_attachments(message),
        reply_to=str(reply["message_id"])
        if isinstance(reply, dict) and "message_id" in reply
        else None,
        message_id=str(message["message_id"]) if "message_id" in message else None,
        occurred_at=unix_ms(message.get("date")),
        raw=update,
    )
    if sender is not None and sender.is_bot:
        return event.model_copy(update={"kind": "bot_echo", "ignore_reason": "sent by a bot"})
    service = [key for key in _SERVICE if key in message]
    if service:
        return event.model_copy(
            update={"kind": "system", "ignore_reason": f"service message ({service[0]})"}
        )
    if event.text is None and not event.attachments:
        return event.model_copy(update={"kind": "unsupported", "ignore_reason": "no text or media"})
    return event


def _callback_answer(query: dict[str, Any]) -> ImmediateAnswer | None:
    """Stop the button's spinner. Telegram takes a Bot API call as the webhook's answer, so
    this needs no request of our own (and no token); its result is never known."""
    query_id = query.get("id")
    if not isinstance(query_id, str) or not query_id:
        return None
    return ImmediateAnswer({"method": "answerCallbackQuery", "callback_query_id": query_id})


def _callback_event(event_id: str, update: dict[str, Any]) -> NexusEvent:
    query = update["callback_query"]
    message = query.get("message") if isinstance(query.get("message"), dict) else {}
    # The keyboard's message tells the forum topic; the answer goes there, like a message's.
    topic = message.get("message_thread_id") if message.get("is_topic_message") else None
    return NexusEvent(
        id=event_id,
        adapter="telegram",
        platform="telegram",
        kind="callback",
        sender=_sender(query.get("from")),
        container=_container(message.get("chat")),
        platform_thread_id=str(topic) if topic is not None else None,
        text=query.get("data"),
        reply_to=str(message["message_id"]) if "message_id" in message else None,
        occurred_at=unix_ms(message.get("date")),
        raw=update,
    )
