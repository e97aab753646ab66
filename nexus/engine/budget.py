"""Token budget: model windows, a ~4 characters per token estimate, exact usage when known."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

CHARS_PER_TOKEN = 4
DEFAULT_WINDOW = 128_000

# Longest matching prefix wins; anything unknown gets DEFAULT_WINDOW.
MODEL_WINDOWS: dict[str, int] = {
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3-7": 200_000,
    "claude-3-5": 200_000,
    "claude-3": 200_000,
    # Newer families not listed above: every Claude model so far has had at least 200k.
    "claude-opus-": 200_000,
    "claude-sonnet-": 200_000,
    "claude-haiku-": 200_000,
    "scripted": 200_000,
}


def context_window(model: str) -> int:
    matches = [prefix for prefix in MODEL_WINDOWS if model.startswith(prefix)]
    return MODEL_WINDOWS[max(matches, key=len)] if matches else DEFAULT_WINDOW


def estimate_text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def estimate_block_tokens(blocks: Iterable[dict[str, Any]]) -> int:
    """Anthropic-shaped content blocks; tool calls count their name and JSON input."""
    total = 0
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            total += estimate_text_tokens(str(block.get("text", "")))
        elif kind == "tool_use":
            payload = json.dumps({"name": block.get("name"), "input": block.get("input")})
            total += estimate_text_tokens(payload)
        elif kind == "tool_result":
            content = block.get("content")
            shown = content if isinstance(content, str) else json.dumps(content, default=str)
            total += estimate_text_tokens(shown)
        else:
            total += estimate_text_tokens(json.dumps(block, default=str))
    return total


def context_tokens(
    *, known_prompt_tokens: int | None, known_completion_tokens: int | None, estimated_after: int
) -> int:
    """Exact size where the ledger measured it (last turn's prompt + completion), plus the
    estimate of what came after; the estimate alone when nothing was measured."""
    if known_prompt_tokens is None:
        return estimated_after
    return known_prompt_tokens + (known_completion_tokens or 0) + estimated_after
