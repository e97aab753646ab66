"""Persona permissions: tool globs where deny always wins, credentials, sandbox, network,
and grants a tool may need beyond being allowed (`people.merge`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from nexus.engine.addresses import NetworkPermissions, network_permissions
from nexus.engine.credentials import credential_ids
from nexus.engine.sandbox import SandboxConfig, sandbox_config

PERMISSION_KEYS = frozenset({"tools", "credentials", "sandbox", "network", "people"})
# What `permissions.people` may grant, each a boolean: `{"people": {"merge": true}}` grants
# `people.merge`, which a tool that merges person entities needs (Tool.permission).
PEOPLE_GRANTS = frozenset({"merge"})


@dataclass(frozen=True)
class ToolPermissions:
    allow: tuple[str, ...] | None = None  # None: every tool is allowed unless denied
    deny: tuple[str, ...] = ()


def _patterns(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise ValueError(f"permissions.tools.{where} must be a list of tool-name patterns")
    return tuple(value)


def from_persona(permissions: Mapping[str, Any]) -> ToolPermissions:
    """Read `{"tools": {"allow": [...], "deny": [...]}}`; absent means no limits."""
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


@dataclass(frozen=True)
class PersonaPermissions:
    tools: ToolPermissions = ToolPermissions()
    credentials: tuple[str, ...] = ()  # the credential ids its tools may be given
    sandbox: SandboxConfig | None = None  # None: no tool that runs code or touches files
    # Hosts and networks its tools may reach besides public addresses (none by default).
    network: NetworkPermissions = field(default_factory=NetworkPermissions)
    grants: frozenset[str] = frozenset()  # named grants, as `people.merge`; none by default


def _grants(people: Any) -> frozenset[str]:
    if people is None:
        return frozenset()
    if not isinstance(people, Mapping):
        raise ValueError('permissions.people must be an object, as {"merge": true}')
    unknown = set(people) - PEOPLE_GRANTS
    if unknown:
        raise ValueError(f"permissions.people has unknown keys: {', '.join(sorted(unknown))}")
    for name, value in people.items():
        if not isinstance(value, bool):
            raise ValueError(f"permissions.people.{name} must be true or false")
    return frozenset(f"people.{name}" for name, value in people.items() if value)


def read_permissions(permissions: Mapping[str, Any]) -> PersonaPermissions:
    """All of a persona's permissions; an unknown key is an error, not silently ignored
    (a misspelt `credentials` would otherwise grant nothing without saying so)."""
    unknown = set(permissions) - PERMISSION_KEYS
    if unknown:
        raise ValueError(f"permissions has unknown keys: {', '.join(sorted(unknown))}")
    credentials = permissions.get("credentials")
    sandbox = permissions.get("sandbox")
    network = permissions.get("network")
    return PersonaPermissions(
        tools=from_persona(permissions),
        credentials=() if credentials is None else credential_ids(credentials),
        sandbox=None if sandbox is None else sandbox_config(sandbox),
        network=NetworkPermissions() if network is None else network_permissions(network),
        grants=_grants(permissions.get("people")),
    )


def tool_allowed(name: str, permissions: ToolPermissions) -> bool:
    """Deny beats allow whatever their order or specificity."""
    if any(fnmatchcase(name, pattern) for pattern in permissions.deny):
        return False
    if permissions.allow is None:
        return True
    return any(fnmatchcase(name, pattern) for pattern in permissions.allow)
