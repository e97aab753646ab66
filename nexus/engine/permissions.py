"""Persona tool permissions: glob allow and deny lists where deny always wins (seed 000)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any


@dataclass(frozen=True)
class ToolPermissions:
    allow: tuple[str, ...] | None = None  # None: every tool is allowed unless denied
    deny: tuple[str, ...] = ()


def _patterns(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise ValueError(f"permissions.tools.{where} must be a list of tool-name patterns")
    return tuple(value)


def from_persona(permissions: Mapping[str, Any]) -> ToolPermissions:
    """Read seed 000's `{"tools": {"allow": [...], "deny": [...]}}`; absent means no limits."""
    tools = permissions.get("tools")
    if tools is None:
        return ToolPermissions()
    if not isinstance(tools, Mapping):
        raise ValueError("permissions.tools must be an object with 'allow' and/or 'deny'")
    unknown = set(tools) - {"allow", "deny"}
    if unknown:
        raise ValueError(f"permissions.tools has unknown keys: {', '.join(sorted(unknown))}")
    allow = _patterns(tools["allow"], "allow") if "allow" in tools else None
    deny = _patterns(tools["deny"], "deny") if "deny" in tools else ()
    return ToolPermissions(allow=allow, deny=deny)


def tool_allowed(name: str, permissions: ToolPermissions) -> bool:
    """Deny beats allow whatever their order or specificity."""
    if any(fnmatchcase(name, pattern) for pattern in permissions.deny):
        return False
    if permissions.allow is None:
        return True
    return any(fnmatchcase(name, pattern) for pattern in permissions.allow)
