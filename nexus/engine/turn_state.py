"""What a turn has produced so far, as the turn machine (nexus.engine.turn) runs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nexus.engine.model import ModelRequest
from nexus.engine.query import QueryMessage
from nexus.ledger.records import MessageDraft, TokenUsage, ToolCallDraft


@dataclass
class TurnState:
    """What the turn has produced so far; nodes append, nothing is rewritten."""

    session_id: str
    request: ModelRequest
    conversation: list[dict[str, Any]]
    drafts: list[MessageDraft] = field(default_factory=list)
    tool_calls: list[ToolCallDraft] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    context_tokens: int | None = None
    model_calls: int = 0
    injected: list[QueryMessage] = field(default_factory=list)

    def add_usage(self, usage: TokenUsage) -> None:
        self.usage = TokenUsage(
            input_tokens=self.usage.input_tokens + usage.input_tokens,
            output_tokens=self.usage.output_tokens + usage.output_tokens,
            cache_read_tokens=self.usage.cache_read_tokens + usage.cache_read_tokens,
            cache_write_tokens=self.usage.cache_write_tokens + usage.cache_write_tokens,
        )
        # The last call saw the whole context and wrote the newest part of it: exact size.
        self.context_tokens = (
            usage.input_tokens
            + usage.cache_read_tokens
            + usage.cache_write_tokens
            + usage.output_tokens
        )

    def append(self, role: str, blocks: list[dict[str, Any]]) -> None:
        if self.conversation and self.conversation[-1]["role"] == role:
            self.conversation[-1] = {
                "role": role,
                "content": [*self.conversation[-1]["content"], *blocks],
            }
        else:
            self.conversation.append({"role": role, "content": blocks})
