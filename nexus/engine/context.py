"""Context assembly: persona, capabilities and history since the last compaction → a request.

The system prompt is the context layers (nexus/engine/layers.py) with a cache breakpoint
after them; the history's last message carries another. The summary of the latest
compaction comes first as "[Previous conversation summary]", then the kept and later turns
in order, then this turn's query messages, each preceded by its event context. Turns are
replayed from the ledger's messages exactly as they were stored, so a context can be
rebuilt from any turn of any thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from nexus.engine import budget, layers
from nexus.engine.attachments import attachment_blocks
from nexus.engine.model import THINKING_BLOCKS, Block, ModelRequest, ToolSpec
from nexus.engine.query import QueryMessage
from nexus.ledger.enums import MessageRole
from nexus.ledger.records import (
    AgentRecord,
    ContextRead,
    MessageRecord,
    SessionRecord,
    TurnView,
)

SUMMARY_HEADER = "[Previous conversation summary]"


@dataclass(frozen=True)
class AssembledContext:
    request: ModelRequest
    window: int
    tokens: int  # the best estimate of the request's size: exact usage where the ledger has it


def system_prompt(
    persona: AgentRecord,
    prompt_additions: Sequence[str],
    tools: Sequence[ToolSpec],
    *,
    session: SessionRecord | None = None,
    workspace: str = "",
) -> tuple[Block, ...]:
    """The context layers in order (see nexus/engine/layers.py), cache breakpoint last."""
    return layers.system_blocks(
        persona=persona,
        session=session,
        workspace=workspace,
        prompt_additions=prompt_additions,
        tools=tools,
    )


# The event line's keys in QueryMessage.context's order. Postgres JSONB does not keep key
# order, so a replayed message must not follow the stored dict's: the text would differ from
# what the model was first sent, and every turn would miss the prompt cache.
_CONTEXT_KEYS = ("source", "time", "platform", "sender")


def _context_order(context: dict[str, Any]) -> list[str]:
    known = [key for key in _CONTEXT_KEYS if key in context]
    return known + sorted(key for key in context if key not in _CONTEXT_KEYS)


def user_blocks(content: dict[str, Any]) -> list[Block]:
    """A stored user message as the model sees it: its event context, its text, then its
    attachments (see nexus.engine.attachments); a message that is only files has no text."""
    blocks: list[Block] = []
    context = content.get("context")
    if isinstance(context, dict) and context:
        described = ", ".join(f"{key}: {context[key]}" for key in _context_order(context))
        blocks.append({"type": "text", "text": f"[event] {described}"})
    files = content.get("attachments")
    text = str(content.get("text", ""))
    if text or not files:
        blocks.append({"type": "text", "text": text})
    if isinstance(files, list) and files:
        platform = context.get("platform") if isinstance(context, dict) else None
        blocks.extend(attachment_blocks([f for f in files if isinstance(f, dict)], platform))
    return blocks


def _tool_result_block(message: MessageRecord) -> Block:
    content = message.content
    error = content.get("error")
    shown = error if error else content.get("result")
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id or str(content.get("id", "")),
        "content": shown if isinstance(shown, str) else json.dumps(shown, default=str),
        "is_error": bool(error),
    }


def thinking_blocks(content: dict[str, Any]) -> list[Block]:
    """A stored answer's extended thinking, as the API gave it: the API checks each block's
    signature, so they go back unchanged and first, before the text or tool_use."""
    stored = content.get("thinking")
    if not isinstance(stored, list):
        return []
    return [
        dict(block)
        for block in stored
        if isinstance(block, dict) and block.get("type") in THINKING_BLOCKS
    ]


def message_to_blocks(message: MessageRecord) -> tuple[str, list[Block]] | None:
    """(role, blocks) for one stored message; None for messages the model never sees."""
    content = message.content
    if message.role == MessageRole.USER:
        return "user", user_blocks(content)
    if message.role == MessageRole.ASSISTANT:
        text = str(content.get("text", ""))
        return (
            ("assistant", [*thinking_blocks(content), {"type": "text", "text": text}])
            if text
            else None
        )
    if message.role == MessageRole.TOOL_CALL:
        block = {
            "type": "tool_use",
            "id": str(content.get("id", message.tool_call_id or "")),
            "name": str(content.get("name", "")),
            "input": content.get("arguments") or {},
        }
        return "assistant", [*thinking_blocks(content), block]
    if message.role == MessageRole.TOOL_RESULT:
        return "user", [_tool_result_block(message)]
    return None  # system notes (compaction summaries, notices) stay out of the replay


def merge_roles(pieces: Iterable[tuple[str, list[Block]]]) -> list[dict[str, Any]]:
    """Adjacent pieces of one role become one message: the API wants roles to alternate."""
    return with_pieces([], pieces)


Pieces = list[tuple[str, list[Block]]]
# How a turn is rendered: `turn_pieces`, or a memo of it (turns never change once committed).
TurnRenderer = Callable[[TurnView], Pieces]


def history_pieces(context: ContextRead, render: TurnRenderer | None = None) -> Pieces:
    render = render or turn_pieces
    pieces: Pieces = []
    if context.compaction is not None:
        summary = f"{SUMMARY_HEADER}\n{context.compaction.summary}"
        pieces.append(("user", [{"type": "text", "text": summary}]))
    for view in context.turns:
        pieces.extend(render(view))
    return pieces


Messages = list[dict[str, Any]]
# How a context's history becomes messages: `history_messages`, or a memo of it that extends
# the previous context's messages by the turns added since (see ContextCache.merged).
HistoryMerger = Callable[[ContextRead, TurnRenderer], Messages]


def history_messages(context: ContextRead, render: TurnRenderer) -> Messages:
    """The history as alternating messages. Shared by later requests: never change them in
    place (`with_pieces` copies what it changes)."""
    return merge_roles(history_pieces(context, render))


def with_pieces(messages: Messages, pieces: Iterable[tuple[str, list[Block]]]) -> Messages:
    """`messages` followed by `pieces`, adjacent pieces of one role joined into one message,
    copying (not changing) any message they join; a history that would start with the
    assistant starts with a "(continued)" user message."""
    joined = list(messages)
    for role, blocks in pieces:
        if joined and joined[-1]["role"] == role:
            joined[-1] = {"role": role, "content": [*joined[-1]["content"], *blocks]}
        else:
            joined.append({"role": role, "content": list(blocks)})
    if joined and joined[0]["role"] != "user":
        joined.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})
    return joined


def turn_pieces(view: TurnView) -> Pieces:
    """One turn's messages as the model sees them. The blocks are shared by every request
    built from a memo of this, so nothing may change them in place."""
    return [piece for m in view.messages if (piece := message_to_blocks(m)) is not None]


def query_pieces(queries: Sequence[QueryMessage]) -> list[tuple[str, list[Block]]]:
    return [("user", user_blocks(query.content())) for query in queries]


def turns_after_compaction(context: ContextRead, anchor_depth: int | None) -> Sequence[TurnView]:
    """The turns committed after the latest compaction (their usage counts the summary)."""
    if context.compaction is None or context.head is None:
        return context.turns
    if anchor_depth is None:
        return ()
    after = context.head.depth - anchor_depth
    return context.turns[len(context.turns) - after :] if after > 0 else ()


def assemble(
    *,
    persona: AgentRecord,
    model: str,
    context: ContextRead,
    queries: Sequence[QueryMessage],
    tools: Sequence[ToolSpec],
    prompt_additions: Sequence[str] = (),
    anchor_depth: int | None = None,
    max_tokens: int = 4096,
    window: int | None = None,
    render: TurnRenderer | None = None,
    session: SessionRecord | None = None,
    workspace: str = "",
    merged: HistoryMerger | None = None,
) -> AssembledContext:
    system = system_prompt(persona, prompt_additions, tools, session=session, workspace=workspace)
    render = render or turn_pieces
    history = (merged or history_messages)(context, render)
    if history:  # the history up to a cache breakpoint on its last block
        last = history[-1]
        history = [*history[:-1], {**last, "content": layers.mark_last_block(last["content"])}]
    new = query_pieces(queries)
    request = ModelRequest(
        model=model,
        system=system,
        # Stable layers, then the history up to a cache breakpoint, then this turn's input.
        messages=tuple(with_pieces(history, new)),
        tools=tuple(tools),
        max_tokens=max_tokens,
    )
    return AssembledContext(
        request=request,
        window=window or budget.context_window(model),
        tokens=estimate_size(
            context,
            lambda: history_pieces(context, render),
            new,
            request.system_text,
            tools,
            anchor_depth,
        ),
    )


def estimate_size(
    context: ContextRead,
    history: Callable[[], Sequence[tuple[str, list[Block]]]],
    new: Sequence[tuple[str, list[Block]]],
    system: str,
    tools: Sequence[ToolSpec],
    anchor_depth: int | None,
) -> int:
    """Exact where the last turn's usage is known (it measured everything before it)."""
    new_tokens = sum(budget.estimate_block_tokens(blocks) for _, blocks in new)
    after = turns_after_compaction(context, anchor_depth)
    last = after[-1].turn if after else None
    if last is not None and last.prompt_tokens is not None:
        known_prompt = (
            last.prompt_tokens + (last.cache_read_tokens or 0) + (last.cache_write_tokens or 0)
        )
        return budget.context_tokens(
            known_prompt_tokens=known_prompt,
            known_completion_tokens=last.completion_tokens,
            estimated_after=new_tokens,
        )
    fixed = budget.estimate_text_tokens(system) + sum(
        budget.estimate_text_tokens(json.dumps(tool.input_schema)) + 10 for tool in tools
    )
    history_tokens = sum(budget.estimate_block_tokens(blocks) for _, blocks in history())
    return fixed + history_tokens + new_tokens
