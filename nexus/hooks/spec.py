"""What a hook module declares and returns, and what it is given (docs/hooks.md, "Hooks")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from nexus.ledger.enums import HookMode, QueueMode
from nexus.ledger.records import EventRecord

RoutingKind = Literal["thread", "session", "persona"]


@dataclass(frozen=True)
class HookMeta:
    """Module-level `HOOK = HookMeta(...)` in a file of the hooks directory."""

    name: str
    description: str = ""
    mode: HookMode = HookMode.PERSISTENT
    schedule: str | None = None  # a cron expression: the hook only sees matching minutes
    timeout_s: float = 2.0


@dataclass(frozen=True)
class Routing:
    kind: RoutingKind = "persona"
    target: str = "atlas"
    queue_mode: QueueMode = QueueMode.FOLLOWUP


@dataclass(frozen=True)
class HookResult:
    fire: bool = False
    routing: Routing | None = None
    prompt: str | None = None  # what the session is asked to do
    extracted: Mapping[str, Any] = field(default_factory=dict)
    disable_hook: bool = False


NOT_FIRED = HookResult()


@dataclass
class HookContext:
    """Given to `evaluate`: the event, read-only lookups, the model, now, the hook's state.

    `state` is the hook's own dictionary; changes are saved after the call returns.
    """

    event: EventRecord
    now_ms: int
    minute_ms: int | None  # for timer events: the minute being ticked
    state: dict[str, Any]
    search_events: Callable[[str, int], list[EventRecord]]
    recent_events: Callable[[int], list[EventRecord]]
    llm: Callable[[str], str]

    @property
    def is_timer(self) -> bool:
        return self.minute_ms is not None
