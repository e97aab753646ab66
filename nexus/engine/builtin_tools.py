"""Built-in tools: `current_time`, `noop`, `present_options`, `react` and `compact_context`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nexus.engine.model import ToolSpec
from nexus.engine.rich import REACTIONS, RichReplyError, parse_reaction, parse_rich
from nexus.engine.tools import CompactionAsk, Tool, ToolContext, ToolFailure, ToolRegistry


def _current_time(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    zone_name = arguments.get("timezone") or "UTC"
    try:
        zone = ZoneInfo(str(zone_name))
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ToolFailure(f"unknown time zone {zone_name!r}; use an IANA name") from error
    # The engine's clock, not the wall clock: a replayed or tested turn sees its own time.
    moment = datetime.fromtimestamp(context.now_ms / 1000, UTC).astimezone(zone)
    return {"iso": moment.isoformat(timespec="seconds"), "unix_ms": context.now_ms}


def _noop(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    answer: dict[str, Any] = {"ok": True}
    if "note" in arguments:
        answer["note"] = arguments["note"]
    return answer


MAX_COMPACTION_INSTRUCTIONS = 2_000  # characters of focus handed to the summariser
COMPACTION_SCHEDULED = (
    "Compaction is scheduled: right after this turn ends, the older turns of this "
    "conversation will be replaced in your context by a summary (nothing is deleted). "
    "This turn goes on with the full context; finish your answer as usual."
)
COMPACTION_ALREADY_SCHEDULED = (
    "Compaction was already requested in this turn; it runs once, right after the turn ends."
)


def _compact_context(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    """Ask for a compaction after this turn (the engine runs it once the turn is committed:
    compacting mid-turn would move the session's head under the turn that is running)."""
    instructions = arguments.get("instructions")
    if isinstance(instructions, str) and len(instructions) > MAX_COMPACTION_INSTRUCTIONS:
        raise ToolFailure(
            f"instructions are {len(instructions)} characters; at most "
            f"{MAX_COMPACTION_INSTRUCTIONS} are allowed"
        )
    asked = context.after_turn.compaction
    if asked is not None:
        return {
            "status": "already_scheduled",
            "message": COMPACTION_ALREADY_SCHEDULED,
            "instructions": asked.instructions,
        }
    focus = instructions.strip() if isinstance(instructions, str) else ""
    context.after_turn.compaction = CompactionAsk(focus or None, context.call_id)
    return {"status": "scheduled", "message": COMPACTION_SCHEDULED, "instructions": focus or None}


def _present_options(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    # Checked now, so the model hears what is wrong while it can still fix it; the outbound
    # planner reads the call's arguments when the turn's answer is sent.
    try:
        rich = parse_rich(arguments)
    except RichReplyError as error:
        raise ToolFailure(str(error)) from error
    if rich.empty:
        raise ToolFailure("give at least one button or embed, or an attachment")
    answer: dict[str, Any] = {
        "attached": rich.to_json(),
        "note": "shown with your final answer; a pressed button comes back as its value",
    }
    if rich.notes:
        answer["cut"] = list(rich.notes)
    return answer


def _react(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    # Checked now; the outbound planner reads the turn's last successful call and sends it
    # with the answer, where the platform has reactions.
    try:
        reaction = parse_reaction(arguments.get("reaction"))
    except RichReplyError as error:
        raise ToolFailure(str(error)) from error
    return {
        "reaction": reaction,
        "note": "put on the message you are answering when the turn ends, where the "
        "platform has reactions (iMessage tapbacks); ignored elsewhere. Write an answer as "
        "usual, or answer NO_REPLY to send the reaction alone.",
    }


_BUTTON = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "description": "what the person sees (75 characters)"},
        "value": {"type": "string", "description": "sent back when pressed (64 bytes)"},
        "url": {"type": "string", "description": "a link button instead of a value"},
    },
    "required": ["label"],
}
_EMBED = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "description": {"type": "string"},
        "url": {"type": "string"},
        "image_url": {"type": "string"},
        "fields": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "value": {"type": "string"},
                    "inline": {"type": "boolean"},
                },
                "required": ["name", "value"],
            },
        },
    },
}
_ATTACHMENT = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "where the file is served (https)"},
        "kind": {"type": "string", "enum": ["audio", "image", "video", "document"]},
        "name": {"type": "string"},
        "mime_type": {"type": "string", "description": "e.g. audio/ogg (a voice note)"},
    },
    "required": ["url", "kind"],
}
PRESENT_OPTIONS = Tool(
    spec=ToolSpec(
        name="present_options",
        description=(
            "Attach buttons and embeds (cards) to your final answer. Buttons: up to 5 rows "
            "of up to 5; a flat list puts one button on each row. A button with a value is a "
            "choice: when pressed, its value comes back to you as the person's message. A "
            "button with a url is a link. Platforms without buttons show a numbered list. "
            "Attachments are files sent after the answer, by URL (an OGG/Opus audio file goes "
            "to WhatsApp as a voice note); elsewhere they are links."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "buttons": {
                    "type": "array",
                    "items": {"anyOf": [_BUTTON, {"type": "array", "items": _BUTTON}]},
                },
                "embeds": {"type": "array", "items": _EMBED, "maxItems": 10},
                "attachments": {"type": "array", "items": _ATTACHMENT, "maxItems": 10},
            },
        },
    ),
    run=_present_options,
)
CURRENT_TIME = Tool(
    spec=ToolSpec(
        name="current_time",
        description="The current date and time, in UTC or a given IANA time zone.",
        input_schema={
            "type": "object",
            "properties": {"timezone": {"type": "string", "description": "e.g. Europe/Paris"}},
        },
    ),
    run=_current_time,
)
NOOP = Tool(
    spec=ToolSpec(
        name="noop",
        description="Does nothing and says so; for testing tool use.",
        input_schema={"type": "object", "properties": {"note": {"type": "string"}}},
    ),
    run=_noop,
)


REACT = Tool(
    spec=ToolSpec(
        name="react",
        description=(
            "React to the message you are answering (an iMessage tapback): love, like, "
            "dislike, laugh, emphasize or question. The last call in a turn counts; it is "
            "sent with your answer, or alone if you answer NO_REPLY. Platforms without "
            "reactions ignore it."
        ),
        input_schema={
            "type": "object",
            "properties": {"reaction": {"type": "string", "enum": list(REACTIONS)}},
            "required": ["reaction"],
        },
    ),
    run=_react,
)


COMPACT_CONTEXT = Tool(
    spec=ToolSpec(
        name="compact_context",
        description=(
            "Compact this conversation: after the current turn ends, older turns are replaced "
            "in your context by a summary (the history itself is kept). Use it when the "
            "conversation is long or has moved on to a new subject."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "instructions": {
                    "type": "string",
                    "description": "what the summary should keep, e.g. decisions, open tasks",
                }
            },
        },
    ),
    run=_compact_context,
)


def builtin_registry() -> ToolRegistry:
    return ToolRegistry([CURRENT_TIME, NOOP, PRESENT_OPTIONS, REACT, COMPACT_CONTEXT])
