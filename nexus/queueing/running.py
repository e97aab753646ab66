"""What a session is doing now, kept from its own stream events (pure): the turn that
started, by which worker, since when, at which step (starting, model call N, tool NAME,
compacting, completing); cleared when the session ends the run.

The coordination store keeps this beside the stream and updates it in the same round trip
as the events it follows, so showing it costs a running turn nothing extra. It is believed
only while the session's lease is held: a worker that died leaves it behind until then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from nexus.engine.stream_events import (
    CONTEXT_COMPACTING,
    SESSION_COMPLETED,
    SESSION_FAILED,
    SESSION_STARTED,
    STEP_STARTED,
    TOOL_STARTED,
    TURN_COMPLETING,
    StreamEvent,
)

# How long a record outlives its last update without a lease renewing the truth of it.
RUNNING_TTL_S = 3_600


@dataclass(frozen=True)
class RunningTurn:
    turn_id: str | None
    worker: str | None
    started_at: int | None  # Unix ms
    step: str | None


@dataclass(frozen=True)
class Change:
    """What an event does to the record: `start` replaces it with `fields`, `set` adds
    `fields` to it, `end` removes it."""

    kind: Literal["start", "set", "end"]
    fields: dict[str, str]


def change_for(event: StreamEvent) -> Change | None:
    """How `event` changes the record; None when it leaves it alone."""
    kind, data = event.type, event.data
    if kind == SESSION_STARTED:
        fields = {"step": "starting"}
        for name in ("turn_id", "worker", "started_at"):
            if data.get(name) is not None:
                fields[name] = str(data[name])
        return Change("start", fields)
    if kind == STEP_STARTED:
        return Change("set", {"step": f"model call {data.get('call', '?')}"})
    if kind == TOOL_STARTED:
        return Change("set", {"step": f"tool {data.get('name', '?')}"})
    if kind == CONTEXT_COMPACTING:
        return Change("set", {"step": "compacting"})
    if kind == TURN_COMPLETING:
        return Change("set", {"step": "completing"})
    if kind in (SESSION_COMPLETED, SESSION_FAILED):
        return Change("end", {})
    return None


def running_from(fields: dict[str, Any]) -> RunningTurn | None:
    """The record as stored (strings, or nothing)."""
    if not fields:
        return None
    started = fields.get("started_at")
    return RunningTurn(
        turn_id=fields.get("turn_id"),
        worker=fields.get("worker"),
        started_at=int(started) if started is not None and str(started).isdigit() else None,
        step=fields.get("step"),
    )
