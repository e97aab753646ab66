"""A hook evaluated on a given event with nothing written (`POST /v1/hooks/{name}/test`,
`nexus hooks test`): no invocation row, no breaker, no state, no firing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nexus.hooks.registry import RunnerFactory
from nexus.ledger.records import EventRecord

# What a test event may leave out: a dry run needs an event, not a stored one.
EVENT_DEFAULTS: dict[str, Any] = {
    "id": "dry-run:1", "adapter": "webhook", "platform": "webhook", "kind": "message",
    "direction": "inbound", "source": None, "space": None, "sender_id": None,
    "sender_name": None, "contact_id": None, "container_kind": None, "container_id": None,
    "platform_thread_id": None, "text": None, "reply_to": None, "message_id": None,
    "occurred_at": 0, "received_at": 0, "status": "received", "disposition": None,
    "disposition_detail": None,
}  # fmt: skip


class UnknownHook(LookupError):
    """No hook of that name loaded from the hooks directory."""


@dataclass(frozen=True)
class DryRun:
    """What the hook decided: whether it fired, how long it took, its error, its result
    as JSON and the state it would have kept."""

    hook: str
    fired: bool
    latency_ms: int
    error: str | None
    result: dict[str, Any] | None
    state_after: dict[str, Any]


def dry_run_event(given: Mapping[str, Any]) -> EventRecord:
    """The event a dry run evaluates: `given` over EVENT_DEFAULTS (pydantic's
    ValidationError when it is not an event)."""
    return EventRecord.model_validate({**EVENT_DEFAULTS, **given})


def dry_run(fresh_runner: RunnerFactory, name: str, event: EventRecord) -> DryRun:
    """Evaluate hook `name`, loaded afresh from the hooks directory, on `event`.

    A file that does not load is skipped (its hook is unknown); UnknownHook when no
    loaded hook has that name, saying which files did not load."""
    problems: list[str] = []
    runner = fresh_runner(on_problem=problems.append)
    try:
        invocation, result = runner.dry_run(name, event)
    except KeyError as error:
        unloaded = f"; not loaded: {'; '.join(problems)}" if problems else ""
        raise UnknownHook(f"{error.args[0]}{unloaded}") from error
    return DryRun(
        hook=name,
        fired=invocation.fired,
        latency_ms=invocation.latency_ms,
        error=invocation.error,
        result=result,
        state_after=invocation.state,
    )
