"""A query message: one input a turn answers, with the event context it arrived in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nexus.ledger.enums import MessageSource


@dataclass(frozen=True)
class QueryMessage:
    text: str
    source: MessageSource = MessageSource.HUMAN
    event_id: str | None = None
    queue_item_id: str | None = None
    platform: str | None = None
    sender_name: str | None = None
    sender_id: str | None = None
    occurred_at: int | None = None  # Unix ms
    # The event's files (nexus.event.Attachment as stored): metadata only, never bytes.
    attachments: tuple[dict[str, Any], ...] = ()
    # A `steer` (not `steer-backlog`) message: worth one more model call after an answer
    # that had no tool boundary left, rather than waiting for the next turn.
    extends_answer: bool = False
    # The per-turn model configuration its event asked for (nexus.engine.model_config JSON).
    model_overrides: dict[str, Any] | None = None

    def context(self) -> dict[str, Any]:
        """The event context stored with the message and shown to the model."""
        found: dict[str, Any] = {"source": str(self.source)}
        if self.occurred_at:
            found["time"] = datetime.fromtimestamp(self.occurred_at / 1000, UTC).isoformat(
                timespec="seconds"
            )
        if self.platform:
            found["platform"] = self.platform
        if self.sender_name or self.sender_id:
            found["sender"] = self.sender_name or self.sender_id
        return found

    def content(self) -> dict[str, Any]:
        """The ledger's `messages.content` for this query (Everruns' user schema + context)."""
        content: dict[str, Any] = {"text": self.text, "context": self.context()}
        if self.attachments:
            content["attachments"] = [dict(item) for item in self.attachments]
        return content
