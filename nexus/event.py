"""NexusEvent: one platform update, normalized, under a deterministic id."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ContainerKind = Literal["dm", "group", "channel"]
EventKind = Literal["message", "edit", "callback", "status", "system", "bot_echo", "unsupported"]

# The adapters Nexus itself writes events under (a worker's result, a hook, the timer): no
# person sent them, and their answer goes wherever the session last heard from a person.
INTERNAL_TRIGGERS: frozenset[str] = frozenset({"agent", "hook", "timer"})

# Only these kinds become turns; the rest are stored with a disposition and go no further.
ROUTABLE_KINDS: frozenset[str] = frozenset({"message", "callback"})
# Attachments kept per event: more than any platform sends at once (Telegram albums and
# Discord messages hold 10, Slack 10 files), few enough that a hostile body stays small.
MAX_ATTACHMENTS = 20
MAX_COUNT = 2**53  # sizes, pixels and seconds: JSON numbers every reader takes exactly


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
    """A file that came with a message: its metadata only, never its bytes.

    The bounds are a last guard; adapters build attachments through
    `nexus.adapters.inbound.attachments`, which clips what a platform sends to fit them.
    """

    model_config = ConfigDict(frozen=True)

    kind: str = Field(max_length=32)  # image, document, voice, audio, video, sticker, file
    file_id: str | None = Field(default=None, max_length=512)  # the platform's own id
    url: str | None = Field(default=None, max_length=2048)  # where the platform serves it
    mime_type: str | None = Field(default=None, max_length=128)
    name: str | None = Field(default=None, max_length=255)
    size: int | None = Field(default=None, ge=0, le=MAX_COUNT)  # bytes
    width: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    height: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    duration: int | None = Field(default=None, ge=0, le=MAX_COUNT)  # seconds


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
    attachments: tuple[Attachment, ...] = Field(default=(), max_length=MAX_ATTACHMENTS)
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
