"""The compaction summary: a model call over the prior summary and the turns leaving context.

When the summariser fails (any error, or an empty answer) a deterministic digest is written
instead, so a session can always compact and never wedges on a broken model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nexus.engine.context import SUMMARY_HEADER
from nexus.engine.model import ModelDone, ModelError, ModelPort, ModelRequest, ModelUnavailable
from nexus.ledger.enums import MessageRole
from nexus.ledger.records import MessageRecord, TokenUsage, TurnView

SUMMARIZER_PROMPT = (
    "You write the running summary of a conversation so that it can continue without its "
    "earlier turns. Keep every fact, name, number, decision, commitment and open task, and "
    "what the user wants. Carry over whatever the previous summary says that still matters. "
    "Answer with the summary only, no preamble."
)
_MESSAGE_LIMIT = 2_000  # characters of one message shown to the summariser
_DIGEST_LINE = 200
_HEADLINE_ASK = 80  # characters of each question in a digest's first line
TRANSCRIPT_HEADER = "[Conversation to summarise]"
# How `transcript` starts each message's first line, and who said it.
_SPEAKERS = (
    ("User: ", "user"),
    ("Assistant called tool ", "tool call"),
    ("Assistant: ", "assistant"),
    ("Tool result: ", "tool result"),
)


@dataclass(frozen=True)
class Summary:
    text: str
    usage: TokenUsage
    model: str | None
    fallback: bool
    error: str | None = None


def transcript(turns: Sequence[TurnView]) -> str:
    """The turns as plain text: tool calls and their results stay next to each other."""
    lines: list[str] = []
    for view in turns:
        lines.extend(line for m in view.messages if (line := _line(m)) is not None)
    return "\n".join(lines)


def _line(message: MessageRecord) -> str | None:
    content = message.content
    if message.role == MessageRole.USER:
        return f"User: {_clip(str(content.get('text', '')))}"
    if message.role == MessageRole.ASSISTANT:
        return f"Assistant: {_clip(str(content.get('text', '')))}"
    if message.role == MessageRole.TOOL_CALL:
        arguments = json.dumps(content.get("arguments") or {}, default=str)
        return f"Assistant called tool {content.get('name')}({_clip(arguments)})"
    if message.role == MessageRole.TOOL_RESULT:
        shown = content.get("error") or json.dumps(content.get("result"), default=str)
        return f"Tool result: {_clip(str(shown))}"
    return None


def _clip(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_request(
    *, model: str, prior: str | None, turns: Sequence[TurnView], instructions: str | None
) -> ModelRequest:
    system = SUMMARIZER_PROMPT
    if instructions:
        system += f"\n\nThe user asked for this focus: {instructions}"
    parts = []
    if prior:
        parts.append(f"{SUMMARY_HEADER}\n{prior}")
    parts.append(f"{TRANSCRIPT_HEADER}\n{transcript(turns)}")
    return ModelRequest(
        model=model,
        system=system,
        messages=({"role": "user", "content": [{"type": "text", "text": "\n\n".join(parts)}]},),
        max_tokens=2048,
        purpose="summary",
    )


def summarize(
    port: ModelPort, request: ModelRequest, *, prior: str | None, turns: Sequence[TurnView]
) -> Summary:
    """Ask the model; fall back to a digest on any failure (the session must move on)."""
    try:
        done = _final(port, request)
    except ModelError as error:
        return Summary(fallback_digest(prior, turns), TokenUsage(), None, True, str(error))
    text = done.text.strip()
    if not text:
        return Summary(fallback_digest(prior, turns), done.usage, done.model, True, "empty summary")
    return Summary(text, done.usage, done.model or request.model, False)


def summarize_with(
    model_for: Callable[[str], ModelPort],
    model_name: str,
    *,
    prior: str | None,
    turns: Sequence[TurnView],
    instructions: str | None,
) -> tuple[Summary, str | None]:
    """The summary by `model_name`, and the provider that wrote it (None: the digest)."""
    request = summary_request(model=model_name, prior=prior, turns=turns, instructions=instructions)
    try:
        port = model_for(model_name)
    except ModelUnavailable as error:
        # Say, NEXUS_SUMMARY_MODEL names a model with no key here: the digest still compacts,
        # rather than wedge the session.
        return Summary(fallback_digest(prior, turns), TokenUsage(), None, True, str(error)), None
    return summarize(port, request, prior=prior, turns=turns), port.provider


def _final(port: ModelPort, request: ModelRequest) -> ModelDone:
    stream = port.stream(request)
    try:
        for event in stream:
            if isinstance(event, ModelDone):
                return event
    finally:
        stream.close()
    raise ModelError("model_error", "the summariser's stream ended without a final message")


def fallback_digest(prior: str | None, turns: Sequence[TurnView]) -> str:
    """First lines of what was said, newest last; keeps the prior summary whole."""
    lines = []
    if prior:
        lines.append(prior)
    lines.append("Earlier turns (automatic digest; the summariser was unavailable):")
    for view in turns:
        for message in view.messages:
            if message.role in (MessageRole.USER, MessageRole.ASSISTANT):
                text = str(message.content.get("text", "")).strip()
                if text:
                    first = text.splitlines()[0]
                    lines.append(f"- {message.role.value}: {_clip(first, _DIGEST_LINE)}")
    return "\n".join(lines)


def digest_request(text: str) -> str:
    """A summary without a model, from a summary request's text (`summary_request`): the
    offline model answers with it, so `nexus dev` compacts into what was actually said.

    Deterministic: the first line names what the user asked, in order (a tree view shows
    it); then the previous summary, whole; then the first line of every message."""
    before, _, conversation = text.partition(TRANSCRIPT_HEADER)
    prior = before.strip().removeprefix(SUMMARY_HEADER).strip() or None
    said: list[tuple[str, str]] = []
    for line in conversation.splitlines():
        for marker, speaker in _SPEAKERS:
            if line.startswith(marker):
                if first := line[len(marker) :].strip():
                    said.append((speaker, first))
                break  # a line that starts no message continues the one before: skipped
    asked = [_clip(first, _HEADLINE_ASK) for speaker, first in said if speaker == "user"]
    headline = f"Summary: {'; '.join(asked)}" if asked else "Summary of the conversation so far"
    lines = [_clip(headline, _DIGEST_LINE * 2)]
    if prior:
        lines.append(prior)
    lines.extend(f"- {speaker}: {_clip(first, _DIGEST_LINE)}" for speaker, first in said)
    return "\n".join(lines)
