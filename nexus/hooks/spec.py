"""What a hook module declares and returns, and what it is given (docs/hooks.md, "Hooks")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

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


class HookSqlError(RuntimeError):
    """`ctx.sql` refused or cut the query: a write, a second statement, over the time
    bound, too many rows, or an error of the query itself; the message says which."""


class SqlQuery(Protocol):
    def __call__(
        self, query: str, params: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class LastRun:
    """A hook's latest recorded invocation (`hook_invocations`)."""

    event_id: str | None
    started_at: int  # ms since the epoch
    latency_ms: int
    fired: bool
    result: Mapping[str, Any] | None  # the HookResult as JSON; None when it errored
    error: str | None


@dataclass(frozen=True)
class HookInfo:
    """What a hook knows of itself (`ctx.hook`): its name, its registry row as saved
    before this call, and its last run. A hook that is not registered (a dry run of a new
    file) has `registered` False and no saved state or run."""

    name: str
    registered: bool = False
    enabled: bool = False
    saved_state: Mapping[str, Any] = field(default_factory=dict)
    breaker_state: str = "closed"
    consecutive_errors: int = 0
    last_fired_at: int | None = None
    last_run: LastRun | None = None


def _no_sql(query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    raise HookSqlError("SQL for hooks is not available here")


def _unknown_hook() -> HookInfo:
    raise RuntimeError("this context was built without its hook")


@dataclass
class HookContext:
    """Given to `evaluate`: the event, read-only lookups, the model, now, the hook's state.

    `state` is the hook's own dictionary; changes are saved after the call returns.
    `sql(query, params)` reads the ledger (one read-only query; HookSqlError otherwise),
    and `hook` is what the hook knows of itself (read from the ledger on first use).
    """

    event: EventRecord
    now_ms: int
    minute_ms: int | None  # for timer events: the minute being ticked
    state: dict[str, Any]
    search_events: Callable[[str, int], list[EventRecord]]
    recent_events: Callable[[int], list[EventRecord]]
    llm: Callable[[str], str]
    sql: SqlQuery = _no_sql
    about_hook: Callable[[], HookInfo] = _unknown_hook
    _hook: HookInfo | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def hook(self) -> HookInfo:
        """The hook's own name, saved state and last run, asked for once per call."""
        if self._hook is None:
            self._hook = self.about_hook()
        return self._hook

    @property
    def is_timer(self) -> bool:
        return self.minute_ms is not None
