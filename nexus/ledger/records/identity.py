"""Events, and the entities and contacts that send them, as records."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from nexus.ledger.enums import MessageSource
from nexus.ledger.records.base import Record


class EntityRecord(Record):
    id: str
    type: str
    name: str
    merged_into: str | None
    tags: list[str]
    is_owner: bool


class ContactRecord(Record):
    """One (platform, sender) and the entity it belongs to."""

    id: str
    platform: str
    sender_id: str
    entity_id: str
    display_name: str | None
    first_seen_at: int
    last_seen_at: int


class EventDraft(Record):
    id: str = Field(min_length=1, max_length=255)
    adapter: str
    platform: str
    kind: str = "message"
    direction: Literal["inbound", "outbound"] = "inbound"
    source: MessageSource | None = None
    space: str | None = None
    sender_id: str | None = None
    sender_name: str | None = None
    container_kind: str | None = None
    container_id: str | None = None
    platform_thread_id: str | None = None
    text: str | None = None
    attachments: tuple[dict[str, Any], ...] = ()
    reply_to: str | None = None
    message_id: str | None = None
    occurred_at: int
    payload: dict[str, Any] = Field(default_factory=dict)
    contact_id: str | None = None
    model_overrides: dict[str, Any] | None = None  # the answering turn's model configuration


class EventRecord(Record):
    id: str
    adapter: str
    platform: str
    kind: str
    direction: str
    source: MessageSource | None
    space: str | None
    sender_id: str | None
    sender_name: str | None
    contact_id: str | None
    container_kind: str | None
    container_id: str | None
    platform_thread_id: str | None
    text: str | None
    attachments: tuple[dict[str, Any], ...] = ()  # nexus.event.Attachment, as stored
    reply_to: str | None
    message_id: str | None
    occurred_at: int
    received_at: int
    status: str
    disposition: str | None
    disposition_detail: str | None
    model_overrides: dict[str, Any] | None = None
    hooks_status: str | None = None  # HookObligation, or None: owes the hooks nothing
