"""The tools one turn may use: granted by capabilities, filtered by persona permissions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nexus.engine.model import ToolSpec
from nexus.engine.permissions import ToolPermissions, tool_allowed
from nexus.engine.tools import ToolContext, ToolFailure, ToolOutcome, ToolRegistry, argument_problem


class Toolbox:
    def __init__(
        self, registry: ToolRegistry, permissions: ToolPermissions, granted: Sequence[str]
    ) -> None:
        self._registry = registry
        self._permissions = permissions
        self._granted = tuple(dict.fromkeys(granted))

    def visible_specs(self) -> list[ToolSpec]:
        """What the model is offered: granted and allowed, in the capabilities' order."""
        names = [name for name in self._granted if tool_allowed(name, self._permissions)]
        return self._registry.specs(names)

    def execute(self, name: str, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Run a call; every way it can go wrong is an error result, never an exception."""
        tool = self._registry.get(name)
        if tool is None or name not in self._granted:
            return ToolOutcome(None, f"unknown tool {name!r}", "unknown")
        if not tool_allowed(name, self._permissions):
            # Checked again here: the model may name a tool it was never offered.
            return ToolOutcome(
                None, f"tool {name!r} is denied by this persona's permissions", "denied"
            )
        problem = argument_problem(tool.spec.input_schema, arguments)
        if problem is not None:
            return ToolOutcome(None, f"invalid arguments for {name}: {problem}", "failed")
        try:
            result = tool.run(arguments, context)
        except ToolFailure as failure:
            return ToolOutcome(None, str(failure), "failed")
        except Exception as error:  # a tool bug must not kill the turn
            return ToolOutcome(None, f"{name} failed: {type(error).__name__}: {error}", "failed")
        return ToolOutcome(_serialisable(result), None, "completed")


def _serialisable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
