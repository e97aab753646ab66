"""Built-in tools (seed 003): `current_time` and `noop`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nexus.engine.model import ToolSpec
from nexus.engine.tools import Tool, ToolContext, ToolFailure, ToolRegistry


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


def builtin_registry() -> ToolRegistry:
    return ToolRegistry([CURRENT_TIME, NOOP])
