"""The built-in `scripted` model: deterministic, offline, and honest about what it is.

It is the embedded default when no ANTHROPIC_API_KEY is set, so `nexus dev` answers
without a network. Tests script it step by step: say something, call tools, fail with a
given error kind, or summarise.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nexus.compaction.summarize import digest_request
from nexus.engine.model import (
    Block,
    ModelDone,
    ModelError,
    ModelRequest,
    ModelStreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolUseStarted,
)
from nexus.engine.prefix_sums import PrefixSums
from nexus.ids import new_id
from nexus.ledger.records import TokenUsage

RECENT_REQUESTS = 100
SCRIPTED_NOTICE = "(Nexus scripted model: no ANTHROPIC_API_KEY is set, so I answer offline.)"


@dataclass(frozen=True)
class Say:
    text: str
    thinking: str | None = None  # extended thinking streamed, and signed, before the text


@dataclass(frozen=True)
class CallTools:
    """Ask for these tools, in order, optionally after some text."""

    calls: tuple[tuple[str, dict[str, Any]], ...]
    text: str | None = None
    thinking: str | None = None


@dataclass(frozen=True)
class Fail:
    """Stream `partial_text`, then fail with `error` (a mid-stream failure when non-empty)."""

    error: ModelError
    partial_text: str = ""


ScriptStep = Say | CallTools | Fail
Responder = Callable[[ModelRequest], ScriptStep]


@dataclass
class ScriptedModel:
    """Answers from a script, then plainly; `chunk_delay_s` makes streams slow on purpose,
    `call_delay_s` makes every call wait before its first event (a real model's latency)."""

    script: deque[ScriptStep | Responder] = field(default_factory=deque)
    chunk_delay_s: float = 0.0
    call_delay_s: float = 0.0
    provider: str = "scripted"
    # The latest requests, for tests and debugging. Bounded: a worker answering with the
    # scripted model for days must not keep every context it was ever sent.
    requests: deque[ModelRequest] = field(default_factory=lambda: deque(maxlen=RECENT_REQUESTS))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _sizes: PrefixSums = field(default_factory=lambda: PrefixSums(_json_size), repr=False)

    @classmethod
    def with_script(
        cls, *steps: ScriptStep | Responder, chunk_delay_s: float = 0.0
    ) -> ScriptedModel:
        return cls(script=deque(steps), chunk_delay_s=chunk_delay_s)

    def push(self, *steps: ScriptStep | Responder) -> None:
        with self._lock:
            self.script.extend(steps)

    def stream(self, request: ModelRequest) -> Generator[ModelStreamEvent, None, None]:
        with self._lock:
            self.requests.append(request)
            scripted = self.script.popleft() if self.script else None
        step = scripted(request) if callable(scripted) else scripted
        if step is None:
            step = Say(_summary(request) if request.purpose == "summary" else _plain(request))
        return self._play(request, step)

    def _play(
        self, request: ModelRequest, step: ScriptStep
    ) -> Generator[ModelStreamEvent, None, None]:
        if self.call_delay_s:
            time.sleep(self.call_delay_s)
        if isinstance(step, Fail):
            yield from self._text(step.partial_text)
            raise step.error
        content: list[Block] = []
        if step.thinking:
            yield from self._thinking(step.thinking)
            content.append(
                {"type": "thinking", "thinking": step.thinking, "signature": signed(step.thinking)}
            )
        text = step.text
        if text:
            yield from self._text(text)
            content.append({"type": "text", "text": text})
        if isinstance(step, CallTools):
            for index, (name, arguments) in enumerate(step.calls, start=len(content)):
                call_id = f"toolu_{new_id()}"
                yield ToolUseStarted(id=call_id, name=name, index=index)
                yield ToolInputDelta(partial_json=json.dumps(arguments), index=index)
                content.append(
                    {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
                )
        yield ModelDone(
            content=tuple(content),
            stop_reason="tool_use" if isinstance(step, CallTools) else "end_turn",
            usage=TokenUsage(
                input_tokens=self._estimate_request(request),
                output_tokens=max(1, len(json.dumps(content)) // 4),
            ),
            model="scripted",
        )

    def _estimate_request(self, request: ModelRequest) -> int:
        size = len(request.system_text) + self._sizes.total(request.messages)
        return max(1, size // 4)

    def _thinking(self, thinking: str) -> Generator[ModelStreamEvent, None, None]:
        for event in self._text(thinking):
            assert isinstance(event, TextDelta)
            yield ThinkingDelta(text=event.text)

    def _text(self, text: str) -> Generator[ModelStreamEvent, None, None]:
        words = text.split(" ")
        for position, word in enumerate(words):
            if self.chunk_delay_s:
                time.sleep(self.chunk_delay_s)
            yield TextDelta(text=word if position == len(words) - 1 else f"{word} ")


def signed(thinking: str) -> str:
    """The scripted model's stand-in for the API's signature: the same thinking always
    signs the same, so a test can tell a block came back unchanged."""
    return "scripted-" + hashlib.sha256(thinking.encode()).hexdigest()[:16]


def _texts(blocks: Iterable[Any]) -> list[str]:
    found: list[str] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            found.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            found.append(f"[tool result] {block.get('content')}")
    return found


def _message_texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    return [content] if isinstance(content, str) else _texts(content or [])


def _plain(request: ModelRequest) -> str:
    last = request.messages[-1] if request.messages else {"content": []}
    # The event-context block (time, platform, sender) is for a real model; echo the words.
    words = [text for text in _message_texts(last) if not text.startswith("[event] ")]
    said = " ".join(words).strip()
    return f"{SCRIPTED_NOTICE} You said: {said}" if said else SCRIPTED_NOTICE


def _summary(request: ModelRequest) -> str:
    """The digest `summarize.digest_request` makes of the request's transcript."""
    text = "\n".join(t for message in request.messages for t in _message_texts(message))
    return digest_request(text)


def _json_size(message: Mapping[str, Any]) -> int:
    return len(json.dumps(message))
