"""Inputs addressed to a session by label or record (the API, the CLI, `POST /v1/route`),
and commands for it (a compaction, a merge notice): stored as events where they are
messages, and queued by `queue_for` like every other input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypedDict, Unpack

from nexus.access.policy import Policy
from nexus.arrival.route import ensure_labelled
from nexus.arrival.service import QUEUED, ArrivalSignals, queue_for, refuse_archived
from nexus.arrival.settings import (
    QueuePolicy,
    arrival,
    check_model,
    policy_for_session,
    turn_layer,
)
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.event import INTERNAL_TRIGGERS
from nexus.ids import new_id
from nexus.ledger.enums import MessageSource, QueueMode, SessionOrigin
from nexus.ledger.records import EventDraft, SessionRecord
from nexus.people.merge import MERGE_REASON, MergeResult, merge_entities
from nexus.queueing.coordination import Coordination
from nexus.queueing.modes import COMPACT
from nexus.settings import Settings

API_ADAPTER = "api"
DEFAULT_PERSONA = "atlas"
# The adapters of inputs Nexus makes itself: no access policy ever saw them, so the policy
# that keys a session is the one its latest message from elsewhere came under.
OWN_ADAPTERS = frozenset({API_ADAPTER, *INTERNAL_TRIGGERS})


class Doors(Protocol):
    """What a door's service (the API's, say) takes of the process's object graph to queue
    an input: the composition root's `Nexus` is one."""

    @property
    def settings(self) -> Settings: ...

    @property
    def doorbell(self) -> Doorbell: ...

    @property
    def coordination(self) -> Coordination: ...

    @property
    def queue_policy(self) -> QueuePolicy: ...

    @property
    def policies(self) -> list[Policy]: ...


@dataclass(frozen=True)
class QueuedMessage:
    event_id: str
    queue_item_id: str
    session: SessionRecord
    mode: QueueMode


class SendOptions(TypedDict, total=False):
    """How a message is queued, as `send_to` takes it; `send_to`'s defaults stand for those
    left out."""

    mode: QueueMode | None
    source: MessageSource
    arrivals: ArrivalSignals | None
    queueing: QueuePolicy | None
    policies: Sequence[Policy]
    model_overrides: dict[str, Any] | None


def new_event_id() -> str:
    """The id of a new event from the API's door."""
    return f"{API_ADAPTER}:{new_id()}"


def session_for_label(
    uow: UnitOfWork, label: str, persona: str | None, event_id: str
) -> SessionRecord:
    """The session `label` (aliases followed), created when missing with `persona` or the
    default persona, as made by the event `event_id`."""
    session = uow.ledger.sessions.resolve(label)
    if session is not None:
        return session
    agent = uow.ledger.agents.ensure(persona or DEFAULT_PERSONA)
    return ensure_labelled(uow.ledger, label, agent.id, SessionOrigin.USER, event_id)


def send_to_session(
    uow: UnitOfWork,
    label: str,
    text: str,
    doorbell: Doorbell,
    *,
    persona: str | None = None,
    **options: Unpack[SendOptions],
) -> QueuedMessage:
    """Queue `text` to the session `label` (aliases followed; created when missing, with
    `persona` or the default persona), with the model configuration its turn is to use
    (`model_overrides`, checked by the caller). The caller commits; the doorbell rings
    after. Raises SessionArchived (nothing stored) for an archived session."""
    event_id = new_event_id()
    session = session_for_label(uow, label, persona, event_id)
    return send_to(uow, session, text, doorbell, event_id=event_id, **options)


def send_checked(
    uow: UnitOfWork,
    doors: Doors,
    session: SessionRecord,
    text: str,
    *,
    mode: QueueMode | None,
    source: MessageSource,
    model_overrides: Mapping[str, Any] | None,
    event_id: str,
) -> QueuedMessage:
    """`send_to` through a door's `doors`, then the model configuration checked against the
    session it went to: ModelConfigError for one it cannot run (the caller then commits
    nothing)."""
    queued = send_to(
        uow,
        session,
        text,
        doors.doorbell,
        mode=mode,
        source=source,
        arrivals=doors.coordination,
        queueing=doors.queue_policy,
        policies=doors.policies,
        model_overrides=turn_layer(model_overrides),
        event_id=event_id,
    )
    check_model(uow, doors.settings.default_model, queued.session, model_overrides)
    return queued


def send_to(
    uow: UnitOfWork,
    session: SessionRecord,
    text: str,
    doorbell: Doorbell,
    *,
    mode: QueueMode | None = None,
    source: MessageSource = MessageSource.HUMAN,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy | None = None,
    policies: Sequence[Policy] = (),
    model_overrides: dict[str, Any] | None = None,
    event_id: str | None = None,
) -> QueuedMessage:
    """`send_to_session` for a session already found: exactly that one, whatever aliases
    say of its label (a thread's session after a merge). `event_id`: the id the message's
    event is to have (a new one when None)."""
    refuse_archived(session)
    event_id = event_id or new_event_id()
    uow.ledger.events.insert(
        EventDraft(
            id=event_id,
            adapter=API_ADAPTER,
            platform=API_ADAPTER,
            source=source,
            text=text,
            occurred_at=uow.ledger.clock(),
            model_overrides=model_overrides,
        )
    )
    uow.ledger.events.mark_processed(event_id, QUEUED, f"session {session.label}")
    event = uow.ledger.events.get(event_id)
    assert event is not None  # inserted just above, in this transaction
    # Precedence: the request, then the session's own setting, then the policy that keys
    # the session, then the defaults (as `GET /v1/sessions/{label}` shows them).
    decision = policy_for_session(uow, policies, session, not_from=OWN_ADAPTERS)
    came = arrival(session, decision, event, queueing or QueuePolicy(), mode=mode)
    queued = queue_for(uow, session, [came], signals=arrivals, doorbell=doorbell)
    # Every event that enters the ledger goes past the hooks, whatever door it came in by:
    # this one skips the router, which runs them for platform messages, so it rings them.
    uow.after_commit(partial(doorbell.hooks_due, event_id))
    return QueuedMessage(
        event_id=event_id, queue_item_id=queued.item_ids[0], session=session, mode=came.mode
    )


def request_compaction(
    uow: UnitOfWork,
    session: SessionRecord,
    doorbell: Doorbell,
    *,
    instructions: str | None,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy | None = None,
) -> str:
    """Queue a compaction of `session`: its runner carries it out under the session's lease,
    in queue order, so no writer but the runner ever commits to the chain. Returns the
    queue item's id; the caller commits, and the doorbell rings after. Raises
    SessionArchived for an archived session."""
    payload: dict[str, object] = {"command": COMPACT}
    if instructions is not None:
        payload["instructions"] = instructions
    return _queue_command(
        uow, session, doorbell, QueueMode.QUEUE, MessageSource.HUMAN, payload, arrivals, queueing
    )


def merge_people(
    uow: UnitOfWork,
    *,
    into: str,
    merged: Sequence[str],
    doorbell: Doorbell,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy | None = None,
) -> MergeResult:
    """Merge entities (`nexus.people.merge`) and tell the primary session with a queued
    notice, in the caller's transaction: the merge, its aliases and the notice commit
    together or not at all."""
    result = merge_entities(uow, into=into, merged=merged)
    if result.primary is not None:
        queue_notice(
            uow,
            result.primary,
            result.notice,
            doorbell,
            payload={"kind": MERGE_REASON, "aliases": list(result.aliases_created)},
            arrivals=arrivals,
            queueing=queueing,
        )
    return result


def queue_notice(
    uow: UnitOfWork,
    session: SessionRecord,
    text: str,
    doorbell: Doorbell,
    *,
    payload: dict[str, Any],
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy | None = None,
) -> str:
    """Queue a notice from Nexus itself (a merge's) for `session`, answered in turn as a
    followup. Returns the queue item's id; the caller commits."""
    return _queue_command(
        uow,
        session,
        doorbell,
        QueueMode.FOLLOWUP,
        MessageSource.EVENT,
        {"text": text, **payload},
        arrivals,
        queueing,
    )


def _queue_command(
    uow: UnitOfWork,
    session: SessionRecord,
    doorbell: Doorbell,
    mode: QueueMode,
    source: MessageSource,
    payload: dict[str, Any],
    arrivals: ArrivalSignals | None,
    queueing: QueuePolicy | None,
) -> str:
    """An input with no event (a command, a notice from Nexus itself), queued by the one
    way in; its queue item's id."""
    came = arrival(
        session, None, None, queueing or QueuePolicy(), mode=mode, source=source, payload=payload
    )
    return queue_for(uow, session, [came], signals=arrivals, doorbell=doorbell).item_ids[0]
