"""Tools, capabilities and the per-turn toolbox."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nexus.engine.builtin_tools import MAX_COMPACTION_INSTRUCTIONS, builtin_registry
from nexus.engine.capabilities import CapabilityRegistry
from nexus.engine.model import ToolSpec
from nexus.engine.permissions import ToolPermissions
from nexus.engine.toolbox import Toolbox
from nexus.engine.tools import (
    AfterTurn,
    CompactionAsk,
    Tool,
    ToolContext,
    ToolFailure,
    ToolRegistry,
)

CONTEXT = ToolContext(
    session_id="s", session_label="dm:x", turn_id="t", persona_id="p", now_ms=1_767_225_600_000
)


def _tool(name: str, run: Any, schema: dict[str, Any] | None = None) -> Tool:
    return Tool(ToolSpec(name, "", schema or {"type": "object", "properties": {}}), run)


def test_current_time_uses_the_engine_clock_and_zone() -> None:
    box = Toolbox(builtin_registry(), ToolPermissions(), ["current_time"])
    utc = box.execute("current_time", {}, CONTEXT)
    assert utc.status == "completed" and utc.result["iso"] == "2026-01-01T00:00:00+00:00"
    paris = box.execute("current_time", {"timezone": "Europe/Paris"}, CONTEXT)
    assert paris.result["iso"] == "2026-01-01T01:00:00+01:00"
    bad = box.execute("current_time", {"timezone": "Mars/Olympus"}, CONTEXT)
    assert bad.status == "failed" and "time zone" in (bad.error or "")


def test_compact_context_asks_once_per_turn_for_after_the_turn() -> None:
    box = Toolbox(builtin_registry(), ToolPermissions(), ["compact_context"])
    after = AfterTurn()
    turn = replace(CONTEXT, after_turn=after)
    first = box.execute(
        "compact_context", {"instructions": "  the invoices  "}, replace(turn, call_id="a")
    )
    assert first.status == "completed" and first.result["status"] == "scheduled"
    assert after.compaction == CompactionAsk(instructions="the invoices", call_id="a")
    again = box.execute("compact_context", {"instructions": "other"}, replace(turn, call_id="b"))
    assert again.status == "completed"
    assert (again.result["status"], again.result["instructions"]) == (
        "already_scheduled",
        "the invoices",
    )
    assert after.compaction.call_id == "a"  # the first ask stands
    fresh = AfterTurn()
    long = "x" * (MAX_COMPACTION_INSTRUCTIONS + 1)
    refused = box.execute(
        "compact_context", {"instructions": long}, replace(CONTEXT, after_turn=fresh)
    )
    assert refused.status == "failed" and fresh.compaction is None
    wrong = box.execute("compact_context", {"instructions": 3}, replace(CONTEXT, after_turn=fresh))
    assert wrong.status == "failed" and fresh.compaction is None
    box.execute("compact_context", {"instructions": "   "}, replace(CONTEXT, after_turn=fresh))
    assert fresh.compaction == CompactionAsk(instructions=None, call_id=None)


def test_denied_and_ungranted_tools_never_run() -> None:
    calls: list[str] = []
    registry = ToolRegistry([_tool("secret", lambda a, c: calls.append("secret"))])
    denied = Toolbox(registry, ToolPermissions(allow=("*",), deny=("sec*",)), ["secret"])
    assert denied.visible_specs() == []
    outcome = denied.execute("secret", {}, CONTEXT)
    assert outcome.status == "denied" and "denied" in (outcome.error or "")
    ungranted = Toolbox(registry, ToolPermissions(), [])
    assert ungranted.execute("secret", {}, CONTEXT).status == "unknown"
    assert calls == []


def test_tool_failures_and_bugs_become_error_results() -> None:
    def clean(arguments: dict[str, Any], context: ToolContext) -> Any:
        raise ToolFailure("no such record")

    def buggy(arguments: dict[str, Any], context: ToolContext) -> Any:
        return 1 / 0

    registry = ToolRegistry([_tool("clean", clean), _tool("buggy", buggy)])
    box = Toolbox(registry, ToolPermissions(), ["clean", "buggy"])
    assert box.execute("clean", {}, CONTEXT).error == "no such record"
    assert "ZeroDivisionError" in (box.execute("buggy", {}, CONTEXT).error or "")


def test_arguments_are_checked_against_the_schema_before_the_tool_runs() -> None:
    calls: list[dict[str, Any]] = []
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    registry = ToolRegistry([_tool("count", lambda a, c: calls.append(a), schema)])
    box = Toolbox(registry, ToolPermissions(), ["count"])
    assert "missing required" in (box.execute("count", {}, CONTEXT).error or "")
    assert "integer" in (box.execute("count", {"n": True}, CONTEXT).error or "")
    assert box.execute("count", {"n": 2}, CONTEXT).status == "completed"
    assert calls == [{"n": 2}]


def test_a_duplicate_tool_name_is_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        ToolRegistry([_tool("x", lambda a, c: 1), _tool("x", lambda a, c: 2)])


def test_capabilities_apply_in_order_and_unavailable_ones_are_refused() -> None:
    registry = CapabilityRegistry()
    resolved = registry.resolve(["current_time", "noop", "current_time"])
    assert resolved.tool_names == ("current_time", "noop")
    assert len(resolved.prompt_additions) == 1 and "current_time" in resolved.prompt_additions[0]
    with pytest.raises(ValueError, match="not available yet"):
        registry.resolve(["file_system"])
    with pytest.raises(ValueError, match="unknown capability"):
        registry.resolve(["telepathy"])
