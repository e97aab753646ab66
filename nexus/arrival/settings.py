"""The settings an input arrives under: the deployment's queue defaults, the access policy
that keys its session, and the session's own (each setting from the first layer that sets
it), and who sent it as the policies see them."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nexus.access.policy import Decision, PeerKind, Policy, Principal, Venue, decide
from nexus.db import UnitOfWork
from nexus.engine.model_config import EffectiveConfig, ModelConfigError, effective_for
from nexus.ledger.enums import MessageSource, QueueMode, SessionStatus, TaskStatus
from nexus.ledger.records import EntityRecord, EventRecord, SessionRecord
from nexus.queueing.caps import DEFAULT_CAP, DropPolicy
from nexus.queueing.modes import DEFAULT_COLLECT_WINDOW_MS
from nexus.queueing.settings import EffectiveQueue, QueueDefaults, QueueOverrides, effective_queue

# A person's message preempts a stale answer; automation waits its turn (docs/runtime.md,
# "Queue modes").
_DEFAULT_MODES = {
    MessageSource.HUMAN: QueueMode.INTERRUPT,
    MessageSource.AGENT: QueueMode.FOLLOWUP,
    MessageSource.CRON: QueueMode.FOLLOWUP,
    MessageSource.TRIGGER: QueueMode.FOLLOWUP,
    MessageSource.WEBHOOK: QueueMode.FOLLOWUP,
}


def archived_reason(session: SessionRecord) -> str:
    """Why a message for an archived session is refused (its one disposition)."""
    if session.task_status == TaskStatus.CANCELLED:  # cancelling a worker archives it
        return f"worker {session.label!r} was cancelled: it takes no new work"
    if session.status == SessionStatus.DELETED:
        return (
            f"session {session.label!r} was deleted: it takes no new work (its label is "
            "free: create a new session to use it again)"
        )
    return f"session {session.label!r} is archived (unarchive it to take messages again)"


def default_queue_mode(source: MessageSource | None) -> QueueMode:
    return _DEFAULT_MODES.get(source, QueueMode.QUEUE) if source else QueueMode.QUEUE


@dataclass(frozen=True)
class QueuePolicy:
    """The deployment's queue defaults (NEXUS_QUEUE_CAP, NEXUS_QUEUE_DROP_POLICY,
    NEXUS_COLLECT_WINDOW_MS): what a session and its policy leave unset."""

    cap: int = DEFAULT_CAP
    drop: DropPolicy = "summarize"
    debounce_ms: int = DEFAULT_COLLECT_WINDOW_MS

    @property
    def defaults(self) -> QueueDefaults:
        return QueueDefaults(cap=self.cap, drop=self.drop, debounce_ms=self.debounce_ms)


class QueueLayer(Protocol):
    """A layer that may set the queue: a session, or the access policy's decision."""

    @property
    def queue_mode(self) -> QueueMode | None: ...
    @property
    def queue_cap(self) -> int | None: ...
    @property
    def drop_policy(self) -> DropPolicy | None: ...
    @property
    def debounce_ms(self) -> int | None: ...


def queue_overrides(layer: QueueLayer) -> QueueOverrides:
    """What `layer` sets of the queue; None leaves a setting to the next layer."""
    return QueueOverrides(
        mode=layer.queue_mode,
        cap=layer.queue_cap,
        drop=layer.drop_policy,
        debounce_ms=layer.debounce_ms,
    )


# The names the layers are read by: a session's own settings, and its policy's.
session_overrides = policy_overrides = queue_overrides


@dataclass(frozen=True)
class Arrival:
    """An input on its way into a session's queue, with the settings it arrived under: an
    event (a message of any kind), or a command with no event (`payload`: a compaction, a
    merge notice) from `source`."""

    event: EventRecord | None
    mode: QueueMode
    settings: EffectiveQueue
    source: MessageSource | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sent_by(self) -> MessageSource | None:
        return self.event.source if self.event is not None else self.source


def arrival(
    session: SessionRecord,
    decision: Decision | None,
    event: EventRecord | None,
    queueing: QueuePolicy,
    *,
    mode: QueueMode | None = None,
    source: MessageSource | None = None,
    payload: Mapping[str, Any] | None = None,
) -> Arrival:
    """Precedence (each setting): the caller's `mode` (a request's, a hook's routing), then
    the session's own, then the policy's (`decision`: the one that keys the session), then
    the defaults; a mode nobody chose is the sender's default."""
    policy = policy_overrides(decision) if decision is not None else QueueOverrides()
    settings = effective_queue(session_overrides(session), policy, queueing.defaults)
    sent_by = event.source if event is not None else source
    chosen = mode or settings.mode.value or default_queue_mode(sent_by)
    return Arrival(event, chosen, settings, source=source, payload=payload or {})


def principal_for(
    uow: UnitOfWork, event: EventRecord, contact_entity: EntityRecord | None = None
) -> Principal:
    """The canonical entity behind the event's sender (progressive identity: contacts, then
    entities, followed through merges). `contact_entity` is the entity of the contact the
    event was stored with, when the caller read it with the event; it is followed through
    merges like a looked-up one."""
    if event.sender_id is None:
        return Principal(type="unknown")
    if contact_entity is not None:
        entity = uow.ledger.identity.canonical(contact_entity)
    else:
        entity = uow.ledger.identity.sender_entity(event.platform, event.sender_id)
    if entity is None:
        return Principal(type="unknown")
    return Principal(
        type="owner" if entity.is_owner else "known",
        entity_id=entity.id,
        tags=frozenset(entity.tags),
    )


def delivery_for(event: EventRecord) -> Venue:
    kind: PeerKind = "dm"
    if event.container_kind in ("group", "channel"):
        kind = "group" if event.container_kind == "group" else "channel"
    return Venue(
        platform=event.platform,
        peer_kind=kind,
        peer_id=event.container_id or event.sender_id or "",
        thread_id=event.platform_thread_id,
    )


def policy_for_session(
    uow: UnitOfWork,
    policies: Sequence[Policy],
    session: SessionRecord,
    *,
    not_from: Collection[str],
) -> Decision | None:
    """What the access policies decide for the session's latest message from outside (an
    adapter not in `not_from`: the API's own and the internal triggers): the policy that
    keys the session. None when it has none, so no policy has applied to it yet."""
    latest = uow.ledger.events.latest_routed_for_session(session.id, set(not_from))
    if latest is None:
        return None
    decision = decide(policies, principal_for(uow, latest), delivery_for(latest))
    return decision if decision.allowed else None


def turn_layer(given: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A message's own model configuration as its queue item keeps it: a null field is
    "not said here", and nothing said is None."""
    found = {name: value for name, value in (given or {}).items() if value is not None}
    return found or None


def check_model(
    uow: UnitOfWork,
    default_model: str,
    session: SessionRecord,
    turn: Mapping[str, Any] | None = None,
) -> None:
    """Raise ModelConfigError unless the turn's, the session's and its persona's layers
    make, together, a configuration a turn can run with (the caller then commits nothing)."""
    persona = uow.ledger.agents.get(session.persona_id)
    if persona is not None:
        effective_for(persona, session, turn=turn, default_model=default_model)


def model_settings(
    uow: UnitOfWork, default_model: str, session: SessionRecord
) -> tuple[EffectiveConfig | None, str | None]:
    """What the session's next turn would run with, or why its layers no longer fit."""
    persona = uow.ledger.agents.get(session.persona_id)
    if persona is None:
        return None, None
    try:
        return effective_for(persona, session, default_model=default_model), None
    except ModelConfigError as error:
        return None, str(error)


# The defaults as shipped, for callers (tests, tools) that bring no settings of their own.
SHIPPED_QUEUE_POLICY = QueuePolicy()
