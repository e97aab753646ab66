"""Discord interactions: Ed25519 over timestamp + body; PING → PONG, commands deferred."""

from __future__ import annotations

from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from nexus.adapters.inbound.attachments import attachment, capped, kind_of
from nexus.adapters.inbound.base import (
    ImmediateAnswer,
    InboundOutcome,
    InboundRequest,
    MalformedRequest,
    SignatureRejected,
    json_body,
)
from nexus.adapters.inbound.bounds import event_id as bounded_id
from nexus.adapters.inbound.signatures import SecretAdapter, required_headers
from nexus.event import Attachment, Author, Container, NexusEvent

SIGNATURE_HEADER = "X-Signature-Ed25519"
TIMESTAMP_HEADER = "X-Signature-Timestamp"
DISCORD_EPOCH_MS = 1_420_070_400_000
PING, APPLICATION_COMMAND, MESSAGE_COMPONENT = 1, 2, 3
PONG = {"type": 1}
# "Thinking…": the answer follows later as a follow-up message; Discord wants one in 3 s.
DEFERRED_CHANNEL_MESSAGE = {"type": 5}
DM_CHANNEL, GROUP_DM_CHANNEL = 1, 3
_THREAD_CHANNEL_TYPES = frozenset({10, 11, 12})  # announcement, public and private threads
# Application command option types that nest further options instead of carrying a value.
_SUB_COMMAND_TYPES = frozenset({1, 2})
MESSAGE_COMMAND = 3  # a context-menu command on a message: data.target_id is that message


class DiscordAdapter(SecretAdapter):
    name = "discord"
    configured_by = "NEXUS_DISCORD_PUBLIC_KEY"

    def __init__(self, public_key_hex: str | None) -> None:
        super().__init__(public_key_hex.strip() if public_key_hex else None)

    def verify(self, request: InboundRequest, *, now_ms: int) -> None:
        # The timestamp is signed, but Discord documents no replay window, so none is
        # enforced here: an invented one could refuse genuine deliveries.
        key_hex = self.configured_secret()
        signature, timestamp = required_headers(request, SIGNATURE_HEADER, TIMESTAMP_HEADER)
        try:
            key = VerifyKey(bytes.fromhex(key_hex))
        except ValueError as error:  # nacl's own ValueError for a wrong length subclasses it
            raise SignatureRejected(f"{self.configured_by} is not a 32-byte hex key") from error
        try:
            signature_bytes = bytes.fromhex(signature)
        except ValueError as error:
            raise SignatureRejected(f"{SIGNATURE_HEADER} is not hex") from error
        try:
            key.verify(timestamp.encode() + request.body, signature_bytes)
        except (BadSignatureError, ValueError) as error:
            raise SignatureRejected(f"{SIGNATURE_HEADER} does not match the body") from error

    def parse(self, request: InboundRequest) -> InboundOutcome:
        interaction = json_body(request)
        kind = interaction.get("type")
        if not isinstance(kind, int) or isinstance(kind, bool):
            raise MalformedRequest("an interaction needs an integer type")
        if kind == PING:
            return InboundOutcome(answer=ImmediateAnswer(PONG))
        interaction_id = interaction.get("id")
        if not isinstance(interaction_id, str) or not (
            interaction_id.isascii() and interaction_id.isdigit()
        ):
            raise MalformedRequest("an interaction needs a snowflake id")
        event = _event(interaction_id, interaction)
        answer = DEFERRED_CHANNEL_MESSAGE if event.routable else None
        return InboundOutcome(
            events=(event,), answer=ImmediateAnswer(answer) if answer is not None else None
        )


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _sender(interaction: dict[str, Any]) -> Author | None:
    user = _obj(interaction.get("member")).get("user") or interaction.get("user")
    if not isinstance(user, dict) or "id" not in user:
        return None
    return Author(
        id=str(user["id"]),
        display_name=user.get("global_name") or user.get("username"),
        is_bot=bool(user.get("bot", False)),
    )


def _where(interaction: dict[str, Any]) -> tuple[Container | None, str | None]:
    channel = _obj(interaction.get("channel"))
    channel_id = interaction.get("channel_id") or channel.get("id")
    if channel_id is None:
        return None, None
    channel_type = channel.get("type")
    # A group DM (user-installed apps only) has no guild but several people: a group.
    if channel_type == GROUP_DM_CHANNEL:
        return Container(kind="group", id=str(channel_id)), None
    if interaction.get("guild_id") is None or channel_type == DM_CHANNEL:
        return Container(kind="dm", id=str(channel_id)), None
    if channel_type in _THREAD_CHANNEL_TYPES and channel.get("parent_id"):
        return Container(kind="group", id=str(channel["parent_id"])), str(channel_id)
    return Container(kind="group", id=str(channel_id)), None


def _command_text(data: dict[str, Any]) -> str:
    """`/name option: value …`, options flattened through sub-commands."""
    parts = [f"/{data.get('name', '')}"]
    pending = [_obj(option) for option in data.get("options") or []]
    while pending:
        option = pending.pop(0)
        if option.get("type") in _SUB_COMMAND_TYPES:  # its name, then its own options, if any
            parts.append(str(option.get("name")))
            pending = [_obj(nested) for nested in option.get("options") or []] + pending
        elif "value" in option:
            parts.append(f"{option.get('name')}: {option['value']}")
    return " ".join(parts)


def _attachments(data: dict[str, Any]) -> tuple[Attachment, ...]:
    """Files given to a command's attachment options, and those of the message a message
    command was used on: both sit in data.resolved (options carry only their ids)."""
    resolved = _obj(data.get("resolved"))
    files = list(_obj(resolved.get("attachments")).values())
    target = _obj(_obj(resolved.get("messages")).get(str(data.get("target_id"))))
    if isinstance(target.get("attachments"), list):
        files.extend(target["attachments"])
    return capped(_attachment(_obj(file)) for file in files)


def _attachment(file: dict[str, Any]) -> Attachment:
    # The CDN URL is signed and public for a while: the model can be handed it as is.
    return attachment(
        kind_of(file.get("content_type")),
        file_id=file.get("id"),
        url=file.get("url"),
        mime_type=file.get("content_type"),
        name=file.get("filename"),
        size=file.get("size"),
        width=file.get("width"),
        height=file.get("height"),
        duration=file.get("duration_secs"),
    )


def _event(interaction_id: str, interaction: dict[str, Any]) -> NexusEvent:
    container, thread = _where(interaction)
    data = _obj(interaction.get("data"))
    event = NexusEvent(
        id=bounded_id("discord:", interaction_id),
        adapter="discord",
        platform="discord",
        space=str(interaction["guild_id"]) if interaction.get("guild_id") else None,
        sender=_sender(interaction),
        container=container,
        platform_thread_id=thread,
        # Interactions carry no date; a snowflake's top bits are ms since Discord's epoch.
        occurred_at=(int(interaction_id) >> 22) + DISCORD_EPOCH_MS,
        raw=interaction,
    )
    kind = interaction.get("type")
    if kind == APPLICATION_COMMAND:
        target = data.get("target_id") if data.get("type") == MESSAGE_COMMAND else None
        return event.model_copy(
            update={
                "text": _command_text(data),
                "attachments": _attachments(data),
                "reply_to": str(target) if target else None,
            }
        )
    if kind == MESSAGE_COMPONENT:
        message = _obj(interaction.get("message"))
        return event.model_copy(
            update={
                "kind": "callback",
                "text": data.get("custom_id"),
                "reply_to": message.get("id"),
            }
        )
    return event.model_copy(
        update={"kind": "unsupported", "ignore_reason": f"interaction type {kind} is not handled"}
    )
