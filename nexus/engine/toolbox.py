"""The tools one turn may use: granted by capabilities, filtered by persona permissions."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from nexus.engine.credentials import (
    CredentialError,
    NoSecrets,
    Scrubber,
    Secrets,
    SecretSource,
)
from nexus.engine.model import ToolSpec
from nexus.engine.permissions import PersonaPermissions, ToolPermissions, tool_allowed
from nexus.engine.tools import (
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    ToolRegistry,
    argument_problem,
)

T = TypeVar("T")


class Toolbox:
    def __init__(
        self,
        registry: ToolRegistry,
        permissions: PersonaPermissions | ToolPermissions,
        granted: Sequence[str],
        *,
        secrets: SecretSource | None = None,
        scrubber: Scrubber | None = None,
    ) -> None:
        self._registry = registry
        if isinstance(permissions, ToolPermissions):
            permissions = PersonaPermissions(tools=permissions)
        self._permissions = permissions
        self._granted = tuple(dict.fromkeys(granted))
        self._secrets = secrets or NoSecrets()
        # Every secret handed out this turn: what the turn stores is scrubbed of them all
        # (its messages and tool calls here; its kept stream events at its commit).
        self._scrubber = scrubber if scrubber is not None else Scrubber()

    def visible_specs(self) -> list[ToolSpec]:
        """What the model is offered: granted and allowed, in the capabilities' order; not
        a tool this persona could never run (no sandbox, or a credential it does not list)."""
        names = []
        for name in self._granted:
            tool = self._registry.get(name)
            if tool is not None and self._refusal(tool, {}) is None:
                names.append(name)
        return self._registry.specs(names)

    def execute(self, name: str, arguments: dict[str, Any], context: ToolContext) -> ToolOutcome:
        """Run a call; every way it can go wrong is an error result, never an exception."""
        tool = self._registry.get(name)
        if tool is None or name not in self._granted:
            return ToolOutcome(None, f"unknown tool {name!r}", "unknown")
        # Checked again here: the model may name a tool it was never offered.
        refusal = self._refusal(tool, arguments)
        if refusal is not None:
            return ToolOutcome(None, refusal, "denied")
        problem = argument_problem(tool.spec.input_schema, arguments)
        if problem is not None:
            return ToolOutcome(None, f"invalid arguments for {name}: {problem}", "failed")
        try:
            secrets = self._resolve(tool, arguments)
        except CredentialError as error:
            return ToolOutcome(None, f"{name} cannot run: {error}", "failed")
        call = dataclasses.replace(
            context,
            credentials=secrets,
            sandbox=self._permissions.sandbox,
            network=self._permissions.network,
        )
        try:
            result = tool.run(arguments, call)
        except ToolFailure as failure:
            return ToolOutcome(None, self.scrub(str(failure)), "failed")
        except Exception as error:  # a tool bug must not kill the turn
            message = f"{name} failed: {type(error).__name__}: {error}"
            return ToolOutcome(None, self.scrub(message), "failed")
        return ToolOutcome(self.scrub(_serialisable(result)), None, "completed")

    def scrub(self, value: T) -> T:
        """The value with every secret this toolbox handed out replaced by [redacted]."""
        return self._scrubber.scrub(value)

    def _refusal(self, tool: Tool, arguments: dict[str, Any]) -> str | None:
        name = tool.spec.name
        if not tool_allowed(name, self._permissions.tools):
            return f"tool {name!r} is denied by this persona's permissions"
        if tool.sandboxed and self._permissions.sandbox is None:
            return (
                f"tool {name!r} runs code or touches files, and this persona's permissions "
                "have no sandbox (permissions.sandbox)"
            )
        if tool.permission is not None and tool.permission not in self._permissions.grants:
            group, _, grant = tool.permission.partition(".")
            return (
                f"tool {name!r} needs the permission {tool.permission!r}, which this persona "
                f'does not have (set permissions.{group} to {{"{grant}": true}} to grant it)'
            )
        for credential in tool.credentials_for(arguments):
            if credential not in self._permissions.credentials:
                return (
                    f"tool {name!r} needs credential {credential[:64]!r}, which this persona's "
                    "permissions do not list (permissions.credentials)"
                )
        return None

    def _resolve(self, tool: Tool, arguments: dict[str, Any]) -> Secrets:
        """The call's secrets and their destinations, looked up now (a rotated secret is
        used at once)."""
        found: dict[str, str] = {}
        hosts: dict[str, tuple[str, ...]] = {}
        for credential in tool.credentials_for(arguments):
            secret = self._secrets.secret(credential)
            try:
                self._scrubber.add(secret)
            except ValueError as error:
                raise CredentialError(f"credential {credential!r}: {error}") from None
            found[credential] = secret
            hosts[credential] = self._secrets.hosts(credential)
        return Secrets(found, hosts)


def _serialisable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value
