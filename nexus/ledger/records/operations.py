"""Hooks, deliveries and mailboxes, as records."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records.base import Record


class HookRecord(Record):
    name: str
    path: str
    description: str
    mode: str
    schedule: str | None
    enabled: bool
    content_hash: str | None
    breaker_state: str
    consecutive_errors: int
    opened_at: int | None
    state: dict[str, Any]
    last_fired_at: int | None


class DeliveryDraft(Record):
    """One chunk of a reply, recorded before anything is sent."""

    turn_id: str
    chunk_index: int = Field(ge=0)
    session_id: str
    event_id: str  # the outbound reply event
    platform: str  # the sender that carries it (the inbound adapter's name)
    target: dict[str, Any]
    text: str
    idempotency_key: str | None = None


class DeliveryRecord(Record):
    id: str
    turn_id: str
    chunk_index: int
    session_id: str
    event_id: str | None
    platform: str
    target: dict[str, Any]
    text: str
    status: DeliveryStatus
    attempts: int
    idempotency_key: str | None
    provider_message_id: str | None
    error: str | None
    next_attempt_at: int | None
    created_at: int
    updated_at: int


class MailboxRecord(Record):
    """A Gmail mailbox's watermark: every message up to `history_id` is stored."""

    mailbox: str
    history_id: int | None  # None: never synced (the next sync starts from now)
    synced_at: int | None  # when a sync last stored everything up to history_id
    watch_expires_at: int | None  # when Gmail stops pushing unless the watch is renewed
    updated_at: int
