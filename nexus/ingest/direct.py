"""Messages addressed to a session by label (the API, the CLI): stored as events like any
platform message, queued by the same path as the router's, with the same cap and signals."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ids import new_id
from nexus.ingest.arrival import (
    Arrival,
    QueuePolicy,
    archived_reason,
    default_queue_mode,
    session_overrides,
)
from nexus.ingest.router import QUEUED, ArrivalSignals, queue_into
from nexus.ledger.enums import MessageSource, QueueMode, SessionOrigin, SessionStatus
from nexus.ledger.records import EventDraft, NewQueueItem, NewSession, SessionRecord
from nexus.ledger.repository import SessionArchived
from nexus.queueing.modes import COMPACT
from nexus.queueing.settings import QueueOverrides, effective_queue

API_ADAPTER = "api"
DEFAULT_PERSONA = "atlas"


@dataclass(frozen=True)
class QueuedMessage:
    event_id: str
    queue_item_id: str
    session: SessionRecord
    mode: QueueMode


def send_to_session(
    uow: UnitOfWork,
    label: str,
    text: str,
    doorbell: Doorbell,
    *,
    persona: str | None = None,
    mode: QueueMode | None = None,
    source: MessageSource = MessageSource.HUMAN,
    arrivals: ArrivalSignals | None = None,
    queueing: QueuePolicy | None = None,
    model_overrides: dict[str, Any] | None = None,
) -> QueuedMessage:
    """Queue `text` to the session `label` (aliases followed; created when missing, with
    `persona` or the default persona), with the model configuration its turn is to use
    (`model_overrides`, checked by the caller). The caller commits; the doorbell rings
    after, for the session and for the hooks."""
    session = uow.ledger.sessions.resolve(label)
    if session is None:
        agent = uow.ledger.agents.ensure(persona or DEFAULT_PERSONA)
        session = uow.ledger.sessions.ensure(
            NewSession(label=label, persona_id=agent.id, origin=SessionOrigin.USER)
        )
    refuse_archived(session)
    event_id = f"{API_ADAPTER}:{new_id()}"
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
    # Precedence: the request, then the session's own setting, then the source's default.
    defaults = (queueing or QueuePolicy()).defaults
    settings = effective_queue(session_overrides(session), QueueOverrides(), defaults)
    chosen = mode or settings.mode.value or default_queue_mode(source)
    event = uow.ledger.events.get(event_id)
    assert event is not None  # inserted just above, in this transaction
    came = Arrival(event, chosen, settings)
    item_id, _ = queue_into(uow, session, came, doorbell, arrivals=arrivals)
    # Every event that enters the ledger goes past the hooks, whatever door it came in by:
    # this one skips the router, which runs them for platform messages, so it rings them.
    uow.after_commit(partial(doorbell.hooks_due, event_id))
    return QueuedMessage(event_id=event_id, queue_item_id=item_id, session=session, mode=chosen)


def refuse_archived(session: SessionRecord) -> None:
    if session.status == SessionStatus.ARCHIVED:
        raise SessionArchived(archived_reason(session))


def request_compaction(
    uow: UnitOfWork, session: SessionRecord, doorbell: Doorbell, *, instructions: str | None
) -> str:
    """Queue a compaction of `session`: its runner carries it out under the session's lease,
    in queue order, so no writer but the runner ever commits to the chain. Returns the
    queue item's id; the caller commits, and the doorbell rings after."""
    refuse_archived(session)
    payload: dict[str, object] = {"command": COMPACT}
    if instructions is not None:
        payload["instructions"] = instructions
    item_id, _ = uow.ledger.queue.enqueue(
        NewQueueItem(
            session_id=session.id,
            mode=QueueMode.QUEUE,
            source=MessageSource.HUMAN,
            payload=payload,
        )
    )
    uow.after_commit(partial(doorbell.session_has_work, session.id))
    return item_id
