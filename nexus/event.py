"""NexusEvent: one platform update, normalized, under a deterministic id."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ContainerKind = Literal["dm", "group", "channel"]
EventKind = Literal["message", "edit", "callback", "status", "system", "bot_echo", "unsupported"]

# Only these kinds become turns; the rest are stored with a disposition and go no further.
ROUTABLE_KINDS: frozenset[str] = frozenset({"message", "callback"})


class Author(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    display_name: str | None = None
    is_bot: bool = False


class Container(BaseModel):
    """Where the message was said: a direct conversation, a group, or a channel."""

    model_config = ConfigDict(frozen=True)

    kind: ContainerKind
    id: str


class Attachment(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str  # photo, voice, document, video, sticker, image, audio, location, ...
    ref: str | None = None  # the platform's file id or URL
    mime_type: str | None = None
    name: str | None = None
    size: int | None = None


class NexusEvent(BaseModel):
    """The one shape every adapter produces.

    `id` is `{adapter}:{provider_id}` — the platform's own id for the delivery (Telegram's
    update_id, Slack's event_id, ...) — so a redelivery is recognised by the ledger's
    primary key. Updates that are not messages (edits we ignore, bot echoes, status
    callbacks) are events too: they are stored with `ignore_reason`, never dropped.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=3, max_length=255)
    adapter: str
    platform: str
    kind: EventKind = "message"
    space: str | None = None  # workspace, team, bot or phone-number id the update came to
    sender: Author | None = None
    container: Container | None = None
    platform_thread_id: str | None = None  # a thread or forum topic inside the container
    text: str | None = None
    attachments: tuple[Attachment, ...] = ()
    reply_to: str | None = None  # the platform message id this one answers
    message_id: str | None = None  # the platform's id of this message, for replies
    occurred_at: int  # Unix milliseconds, as the platform dated it
    raw: dict[str, Any] = Field(default_factory=dict)
    ignore_reason: str | None = None
    # A status callback's news about one of our messages (sent, delivered, read, failed…),
    # about the platform message `message_id`.
    delivery_status: str | None = None
    # The model configuration the turn answering this event is to use (a bridge may ask
    # for one on POST /v1/events; platforms never do). nexus.engine.model_config's JSON.
    model_overrides: dict[str, Any] | None = None

    @property
    def routable(self) -> bool:
        return self.kind in ROUTABLE_KINDS and self.ignore_reason is None
