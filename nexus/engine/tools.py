"""Tools: a registry of named functions with JSON schemas, and what a call came to."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from nexus.engine.addresses import NetworkPermissions
from nexus.engine.credentials import Secrets
from nexus.engine.model import ToolSpec
from nexus.engine.sandbox import SandboxConfig

if TYPE_CHECKING:
    from nexus.db import UnitOfWork

ToolStatus = Literal["completed", "failed", "denied", "unknown"]
# A change to the ledger a tool asks for, applied in the transaction that commits its turn
# (with the committed turn's id): a fenced or failed turn leaves no trace of it.
Effect = Callable[["UnitOfWork", str], None]


@dataclass(frozen=True)
class CompactionAsk:
    """A tool's request to compact the session once its turn is committed."""

    instructions: str | None
    call_id: str | None


@dataclass
class AfterTurn:
    """What a turn's tools asked the engine to do after the turn commits; shared by the
    turn's calls, so a second ask in the same turn finds the first (one compaction, not two)."""

    compaction: CompactionAsk | None = None


@dataclass(frozen=True)
class ToolContext:
    """Where a tool runs: the session and turn it serves, and the engine's notion of now."""

    session_id: str
    session_label: str
    turn_id: str
    persona_id: str
    now_ms: int
    extras: Mapping[str, Any] = field(default_factory=dict)
    call_id: str | None = None  # the model's id for the tool call being run
    effects: list[Effect] = field(default_factory=list)  # shared by the turn's calls
    credentials: Secrets = field(default_factory=Secrets)  # this call's secrets, by id
    sandbox: SandboxConfig | None = None  # the persona's limits, for a sandboxed tool
    # What the persona may reach besides the public internet (permissions.network).
    network: NetworkPermissions = field(default_factory=NetworkPermissions)
    after_turn: AfterTurn = field(default_factory=AfterTurn)  # shared by the turn's calls


class ToolFailure(Exception):
    """A tool's own clean failure; its message goes to the model as the error result."""


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    run: Callable[[dict[str, Any], ToolContext], Any]
    credentials: tuple[str, ...] = ()  # credential ids every call needs
    # An argument that names one more credential id for the call (say, which token to send).
    credential_argument: str | None = None
    sandboxed: bool = False  # runs code or touches files: needs the persona's sandbox
    # A grant the persona's permissions must give besides allowing the tool (`people.merge`).
    permission: str | None = None

    def credentials_for(self, arguments: Mapping[str, Any]) -> tuple[str, ...]:
        named = arguments.get(self.credential_argument) if self.credential_argument else None
        extra = (named,) if isinstance(named, str) and named else ()
        return tuple(dict.fromkeys((*self.credentials, *extra)))


@dataclass(frozen=True)
class ToolOutcome:
    result: Any
    error: str | None
    status: ToolStatus


class ToolRegistry:
    """Every tool this process can run, by unique name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.spec.name in self._tools:
            raise ValueError(f"a tool named {tool.spec.name!r} is already registered")
        self._tools[tool.spec.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self, names: Iterable[str]) -> list[ToolSpec]:
        return [self._tools[name].spec for name in names if name in self._tools]


def argument_problem(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """Why `arguments` do not fit the schema's top level, or None.

    Only the shape the model most often gets wrong is checked (an object with its required
    keys, of the declared primitive types); the tool validates the rest itself.
    """
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    missing = [key for key in schema.get("required", []) if key not in arguments]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    properties = schema.get("properties", {})
    for key, value in arguments.items():
        expected = properties.get(key, {}).get("type") if isinstance(properties, dict) else None
        if isinstance(expected, str) and not _fits(expected, value):
            return f"argument {key!r} must be of type {expected}"
    return None


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _fits(expected: str, value: Any) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False  # JSON true is not a number, though Python's bool is an int
    allowed = _TYPES.get(expected)
    return allowed is None or isinstance(value, allowed) or (value is None and expected == "null")
