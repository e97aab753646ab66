"""AnthropicModel: one streamed Messages API call, its deltas and its final content."""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

from nexus.adapters.anthropic.errors import to_model_error
from nexus.engine.layers import mark_last_block
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
from nexus.ledger.records import TokenUsage

# Blocks whose `input` streams as input_json_delta fragments.
_INPUT_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
MAX_CACHE_BREAKPOINTS = 4  # per request, the API's limit
_USAGE_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
}


class AnthropicModel:
    """The engine's ModelPort over the Messages API, streaming raw events."""

    provider = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._client: anthropic.Anthropic | None = None

    def _anthropic(self) -> anthropic.Anthropic:
        # Built on first use so that importing or configuring never touches the network.
        if self._client is None:
            self._client = anthropic.Anthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=self._max_retries,
            )
        return self._client

    def stream(self, request: ModelRequest) -> Generator[ModelStreamEvent, None, None]:
        """Yield deltas, then one ModelDone; closing the generator closes the HTTP stream.

        Failures before the first byte are retried by the SDK (`max_retries`); a failure
        mid-stream is raised at once, after the deltas already yielded.
        """
        try:
            response = self._anthropic().messages.create(**_arguments(request), stream=True)
        except anthropic.APIError as error:
            raise to_model_error(error) from error
        state = _StreamState()
        try:
            for event in response:
                yield from state.apply(event.model_dump(exclude_none=True))
        except (anthropic.APIError, httpx2.HTTPError) as error:
            raise to_model_error(error) from error
        finally:
            response.close()  # the engine aborts by closing us: drop the connection too
        yield state.done(request.model)


def _arguments(request: ModelRequest) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "model": request.model,
        "system": request.system if isinstance(request.system, str) else list(request.system),
        "messages": _cached_tail(request),
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        arguments["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    if request.thinking is not None:
        arguments["thinking"] = {"type": "enabled", "budget_tokens": request.thinking}
    if request.temperature is not None:
        # SDK 1.x+ dropped sampling knobs from create()'s signature; the API still takes them.
        arguments["extra_body"] = {"temperature": request.temperature}
    return arguments


def _cached_tail(request: ModelRequest) -> list[dict[str, Any]]:
    """The messages, with a cache breakpoint on the last one when the request caches at all
    (its system blocks carry one): the tool loop's next call, and the next turn, read
    everything up to here from the cache. The API allows four breakpoints; the engine sets
    two (after the stable layers, at the end of history), so this is the third."""
    messages = list(request.messages)
    if isinstance(request.system, str) or not messages:
        return messages
    marks = sum(1 for block in request.system if "cache_control" in block) + sum(
        1
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and "cache_control" in block
    )
    if marks == 0 or marks >= MAX_CACHE_BREAKPOINTS:
        return messages
    last = messages[-1]
    content = last.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if isinstance(content, list) and content and "cache_control" not in content[-1]:
        messages[-1] = {**last, "content": mark_last_block(content)}
    return messages


@dataclass
class _StreamState:
    """Rebuilds the answer's content blocks and usage from the raw event stream."""

    blocks: dict[int, Block] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    model: str | None = None
    stopped: bool = False

    def apply(self, event: dict[str, Any]) -> list[ModelStreamEvent]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message", {})
            self.model = message.get("model")
            self._take_usage(message.get("usage", {}))
        elif kind == "content_block_start":
            return self._start_block(event["index"], event.get("content_block", {}))
        elif kind == "content_block_delta":
            return self._delta(event["index"], event.get("delta", {}))
        elif kind == "message_delta":
            self.stop_reason = event.get("delta", {}).get("stop_reason") or self.stop_reason
            self._take_usage(event.get("usage", {}))  # carries the final output_tokens
        elif kind == "message_stop":
            self.stopped = True
        return []

    def done(self, requested_model: str) -> ModelDone:
        if not self.stopped or self.stop_reason is None:
            raise ModelError("model_error", "the stream ended before message_stop", retryable=True)
        return ModelDone(
            content=self._content(),
            stop_reason=self.stop_reason,
            usage=TokenUsage(
                **{ours: self.usage.get(api, 0) for api, ours in _USAGE_FIELDS.items()}
            ),
            model=self.model or requested_model,
        )

    def _take_usage(self, usage: dict[str, Any]) -> None:
        self.usage.update({k: v for k, v in usage.items() if k in _USAGE_FIELDS and v is not None})

    def _start_block(self, index: int, block: dict[str, Any]) -> list[ModelStreamEvent]:
        self.blocks[index] = dict(block)
        if block.get("type") == "tool_use":
            return [ToolUseStarted(id=block["id"], name=block["name"], index=index)]
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[ModelStreamEvent]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return [TextDelta(text=delta["text"], index=index)]
        if kind == "input_json_delta":
            piece = delta.get("partial_json", "")
            self.partial_json.setdefault(index, []).append(piece)
            return [ToolInputDelta(partial_json=piece, index=index)]
        if kind == "thinking_delta":
            piece = delta.get("thinking", "")
            block["thinking"] = block.get("thinking", "") + piece
            return [ThinkingDelta(text=piece, index=index)] if piece else []
        if kind == "signature_delta":
            block["signature"] = delta.get("signature", "")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        return []

    def _content(self) -> tuple[Block, ...]:
        content: list[Block] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.get("type") == "text" and not block.get("text"):
                continue  # e.g. a refusal's empty block: the API rejects empty text on replay
            if block.get("type") in _INPUT_BLOCKS:
                parsed = self._input(index)
                if parsed is None:
                    continue  # cut off by max_tokens mid-input: no call the engine could run
                block = {**block, "input": parsed}
            content.append(block)
        return tuple(content)

    def _input(self, index: int) -> dict[str, Any] | None:
        raw = "".join(self.partial_json.get(index, []))
        if not raw.strip():
            return {}
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        if self.stop_reason == "max_tokens":
            return None
        raise ModelError(
            "model_error", f"a tool input is not a JSON object: {raw[:200]}", retryable=True
        )
