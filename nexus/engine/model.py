"""The model port: one streaming call to a language model, in Anthropic's message shape.

The engine speaks the Messages API's shape (`role` user/assistant, content blocks `text`,
`thinking`, `tool_use`, `tool_result`) to every model, because that is the richest shape we
target and translating it for the built-in scripted model costs nothing. A model yields
stream deltas and ends with exactly one `ModelDone`; failures raise `ModelError` with a kind
the engine can act on (compact and retry, back off, or fail the turn).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from nexus.ledger.records import TokenUsage

ErrorKind = Literal[
    "context_overflow", "auth_failure", "rate_limit", "model_error", "timeout", "unknown"
]
StopReason = str  # end_turn, tool_use, max_tokens, stop_sequence, pause_turn, refusal, aborted

Block = dict[str, Any]
"""One content block as the Messages API writes it: {"type": "text", "text": ...}, ..."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    model: str
    # One text, or text blocks in order (the engine's context layers; a block may carry
    # `cache_control`, which providers without prompt caching ignore).
    system: str | tuple[Block, ...]
    messages: tuple[dict[str, Any], ...]  # {"role": "user"|"assistant", "content": [Block]}
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None
    # Extended thinking's budget in tokens (None: no thinking); below max_tokens.
    thinking: int | None = None
    # Why the engine calls: a conversation turn or a compaction summary. Providers ignore it;
    # the scripted model answers a summary request with a summary.
    purpose: Literal["turn", "summary"] = "turn"

    @property
    def system_text(self) -> str:
        """The system prompt as one text, for models and estimates that take no blocks."""
        if isinstance(self.system, str):
            return self.system
        return "\n\n".join(str(block.get("text", "")) for block in self.system)


@dataclass(frozen=True)
class TextDelta:
    """A piece of assistant text as it streams."""

    text: str
    index: int = 0  # the content block it belongs to


@dataclass(frozen=True)
class ThinkingDelta:
    """A piece of the model's extended thinking as it streams (its signature comes whole,
    in the `thinking` block of ModelDone's content)."""

    text: str
    index: int = 0


@dataclass(frozen=True)
class ToolUseStarted:
    """The model began a tool call; its input streams as `ToolInputDelta`s."""

    id: str
    name: str
    index: int = 0


@dataclass(frozen=True)
class ToolInputDelta:
    partial_json: str
    index: int = 0


@dataclass(frozen=True)
class ModelDone:
    """The whole answer: the content blocks in order, why it stopped, and what it cost."""

    content: tuple[Block, ...]
    stop_reason: StopReason
    usage: TokenUsage = field(default_factory=TokenUsage)
    model: str | None = None

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def thinking(self) -> tuple[Block, ...]:
        return tuple(b for b in self.content if b.get("type") in THINKING_BLOCKS)

    @property
    def tool_uses(self) -> tuple[Block, ...]:
        return tuple(b for b in self.content if b.get("type") == "tool_use")


ModelStreamEvent = TextDelta | ThinkingDelta | ToolUseStarted | ToolInputDelta | ModelDone

# Content blocks of extended thinking: they go back to the model unchanged (signature and
# all) before the tool_use they came with, or the API refuses the tool loop's next call.
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


class ModelError(Exception):
    """A failed model call. `retryable` says whether the same request may succeed later."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        retryable: bool = False,
        status_code: int | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind: ErrorKind = kind
        self.message = message
        self.retryable = retryable
        self.status_code = status_code


class ModelUnavailable(Exception):
    """A persona names a model this deployment cannot reach (say, no API key)."""


class ModelPort(Protocol):
    """A language model. `stream` is a generator: closing it early cancels the call."""

    provider: str

    def stream(self, request: ModelRequest) -> Generator[ModelStreamEvent, None, None]:
        """Yield deltas as they arrive and end with one ModelDone; raise ModelError."""
        ...
