"""agent_send's targets and what each dispatch writes with the turn that asked for it.

A target is read from the tool's arguments (pure: `read_target`). The tool checks it while
the call runs, so a bad target is a tool error the model sees; what it then asks of the
ledger is an effect that lands in the commit of its turn (`SpawnWorker`, `ForkTask`,
`SessionTask`). Should the ledger have changed in between (a session archived, a label
taken meanwhile), the effect's writes are rolled back to a savepoint and the caller gets a
failed `worker_result` instead: the turn itself always commits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from nexus.agents.posting import post
from nexus.agents.results import report_undispatched
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import SessionOrigin, SessionStatus, TaskKind
from nexus.ledger.records import NewSession, NewTask, SessionRecord
from nexus.ledger.repository import LedgerError, SessionArchived

log = structlog.get_logger(__name__)

TargetKind = Literal["new_session", "session", "fork"]
_KINDS: tuple[TargetKind, ...] = ("new_session", "session", "fork")
TARGET_SHAPE = (
    '{"new_session": true | {"persona"?: name, "labelHint"?: text}} | '
    '{"session": label} | {"fork": turn_id, "labelHint"?: text}'
)


class BadTarget(ValueError):
    """The target is not one agent_send understands; the message says what is wanted."""


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    value: str | None = None  # the session's label, or the turn to fork
    persona: str | None = None  # new_session only
    label_hint: str | None = None  # new_session and fork


def _text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadTarget(f"{what} must be a string")
    return value


def read_target(arguments: Mapping[str, Any]) -> Target:
    """The dispatch target in agent_send's arguments (none: a new worker). `persona` may
    also be given beside `target`, as before targets had options."""
    target = arguments.get("target")
    if target is None:
        target = {"new_session": True}
    if not isinstance(target, dict):
        raise BadTarget(f"target must be an object: {TARGET_SHAPE}")
    named = [kind for kind in _KINDS if kind in target]
    if len(named) > 1:
        raise BadTarget(f"target names {' and '.join(named)}: give exactly one of {TARGET_SHAPE}")
    unknown = set(target) - {*_KINDS, "labelHint", "persona"}
    if unknown:
        raise BadTarget(f"target has unknown keys {sorted(unknown)}: {TARGET_SHAPE}")
    kind: TargetKind = named[0] if named else "new_session"
    options = target.get("new_session") if kind == "new_session" else None
    options = options if isinstance(options, dict) else {}
    hint = _text(options.get("labelHint", target.get("labelHint")), "labelHint")
    persona = _text(
        options.get("persona", target.get("persona", arguments.get("persona"))), "persona"
    )
    if kind == "new_session":
        return Target(kind, persona=persona or None, label_hint=hint)
    if persona:
        keeps = "a fork keeps its turn's persona" if kind == "fork" else "a session has its own"
        raise BadTarget(f"persona is for a new worker only: {keeps}")
    value = _text(target[kind], kind)
    if not value:
        raise BadTarget(f"target.{kind} must name a {'session' if kind == 'session' else 'turn'}")
    if kind == "session" and hint is not None:
        raise BadTarget("labelHint names a new session; a session target already has a label")
    return Target(kind, value=value, label_hint=hint)


def _land(
    uow: UnitOfWork,
    doorbell: Doorbell | None,
    caller: SessionRecord,
    name: str,
    key: str,
    writes: Callable[[], None],
) -> None:
    """Run `writes` under a savepoint; if the ledger refuses them, undo them and tell the
    caller, so the turn that asked still commits."""
    try:
        with uow.connection.begin_nested():
            writes()
    except LedgerError as error:
        log.warning("dispatch_undone", caller=caller.label, target=name, reason=str(error))
        report_undispatched(uow, doorbell, caller, name, key, str(error))


def _task_payload(caller: SessionRecord, task_id: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"kind": "task", "from": caller.label}
    if task_id is not None:
        payload["task"] = task_id
    return payload


@dataclass(frozen=True)
class SpawnWorker:
    """The effect of a dispatch to a new worker: the session, linked to the dispatching
    turn and call, and its task queued to it."""

    doorbell: Doorbell | None
    caller: SessionRecord
    call_id: str | None
    label: str  # the new session's: the turn's later calls may not promise it again
    persona_id: str
    text: str

    def __call__(self, uow: UnitOfWork, turn_id: str) -> None:
        def writes() -> None:
            # The dispatching call names its worker (so "which workers did this turn
            # spawn?" is a lookup, docs/hooks.md "A worker's task and its status"), in
            # the commit that creates it.
            spawned = uow.ledger.workers.record_spawn
            tool_call = spawned(turn_id, self.call_id, self.label) if self.call_id else None
            worker = uow.ledger.sessions.create(
                NewSession(
                    label=self.label,
                    persona_id=self.persona_id,
                    origin=SessionOrigin.SUBAGENT,
                    parent_session_label=self.caller.label,
                    parent_turn_id=turn_id,
                    spawn_tool_call_id=tool_call,
                    task_description=self.text,
                ),
                reason="dispatch",
            )
            post(
                uow,
                self.doorbell,
                session_id=worker.id,
                event_id=f"agent:{self.label}:task",
                text=self.text,
                payload=_task_payload(self.caller),
                lineage=uow.ledger.events.hook_lineage(turn_id=turn_id),
            )

        _land(uow, self.doorbell, self.caller, self.label, self.label, writes)


@dataclass(frozen=True)
class ForkTask:
    """The effect of a dispatch to a fork: the fork of `turn`, its task queued to it and
    tracked, so the fork's answer comes back to the caller."""

    doorbell: Doorbell | None
    caller: SessionRecord
    call_id: str | None
    label: str  # the new session's: the turn's later calls may not promise it again
    turn: str
    task_id: str
    text: str

    def __call__(self, uow: UnitOfWork, turn_id: str) -> None:
        def writes() -> None:
            forked = uow.ledger.sessions.fork(self.turn, label=self.label)
            spawned = uow.ledger.workers.record_spawn
            tool_call = spawned(turn_id, self.call_id, self.label) if self.call_id else None
            _queue_task(uow, self, turn_id, tool_call, forked.id, TaskKind.FORK)

        _land(uow, self.doorbell, self.caller, self.label, self.task_id, writes)


@dataclass(frozen=True)
class SessionTask:
    """The effect of a dispatch to an existing session: the task queued to it and tracked,
    so its answer to this message comes back to the caller."""

    doorbell: Doorbell | None
    caller: SessionRecord
    call_id: str | None
    target: SessionRecord
    task_id: str
    text: str

    def __call__(self, uow: UnitOfWork, turn_id: str) -> None:
        def writes() -> None:
            now = uow.ledger.sessions.get(self.target.id)
            if now is None or now.status != SessionStatus.ACTIVE:
                raise SessionArchived(
                    f"session {self.target.label!r} was {now.status if now else 'deleted'} "
                    "meanwhile"
                )
            tool_call = (
                uow.ledger.workers.tool_call(turn_id, self.call_id) if self.call_id else None
            )
            _queue_task(uow, self, turn_id, tool_call, now.id, TaskKind.SESSION)

        _land(uow, self.doorbell, self.caller, self.target.label, self.task_id, writes)


def _queue_task(
    uow: UnitOfWork,
    effect: ForkTask | SessionTask,
    turn_id: str,
    tool_call: str | None,
    session_id: str,
    kind: TaskKind,
) -> None:
    post(
        uow,
        effect.doorbell,
        session_id=session_id,
        event_id=effect.task_id,
        text=effect.text,
        payload=_task_payload(effect.caller, effect.task_id),
        lineage=uow.ledger.events.hook_lineage(turn_id=turn_id),
    )
    uow.ledger.tasks.create(
        NewTask(
            event_id=effect.task_id,
            caller_session_label=effect.caller.label,
            caller_turn_id=turn_id,
            tool_call_id=tool_call,
            session_id=session_id,
            kind=kind,
            description=effect.text,
        )
    )


def promised_labels(effects: list[Any]) -> set[str]:
    """The labels this turn's earlier calls promised to new sessions."""
    return {effect.label for effect in effects if isinstance(effect, SpawnWorker | ForkTask)}
