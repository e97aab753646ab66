"""One session in full — its effective queue and model settings (and where each came from),
the turn it runs now and what waits — and changing its own settings, its title and tags,
its archive state, or deleting it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from nexus.arrival.messages import OWN_ADAPTERS, Doors
from nexus.arrival.settings import (
    archived_reason,
    check_model,
    model_settings,
    policy_for_session,
    policy_overrides,
    session_overrides,
)
from nexus.db import Database, UnitOfWork
from nexus.engine.model_config import EffectiveConfig
from nexus.ledger.enums import OPEN_QUEUE_STATUSES, SessionStatus
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository import SessionDeleted
from nexus.queueing.pending import Pending, pending
from nexus.queueing.running import RunningTurn
from nexus.queueing.settings import EffectiveQueue, QueueOverrides, effective_queue
from nexus.sessions.deletion import delete_session
from nexus.sessions.entries import SessionEntry, entry, get_any


@dataclass(frozen=True)
class SessionDetail:
    """A session with its settings, the turn it runs now and what waits."""

    entry: SessionEntry
    queue: EffectiveQueue
    policy: str | None  # the access policy its latest platform message matched
    running: RunningTurn | None
    pending: Pending
    model: EffectiveConfig | None  # what its next turn would run with
    model_error: str | None  # or why its layers no longer fit


def detail(uow: UnitOfWork, doors: Doors, session: SessionRecord) -> SessionDetail:
    """`session` in full, read in `uow`."""
    # The same layers an input to the session arrives under (nexus/arrival/settings.py).
    decision = policy_for_session(uow, doors.policies, session, not_from=OWN_ADAPTERS)
    policy = policy_overrides(decision) if decision is not None else QueueOverrides()
    found = effective_queue(session_overrides(session), policy, doors.queue_policy.defaults)
    waiting = uow.ledger.queue.for_session(session.id, statuses=list(OPEN_QUEUE_STATUSES))
    model, refused = model_settings(uow, doors.settings.default_model, session)
    return SessionDetail(
        entry=entry(uow, session),
        queue=found,
        policy=decision.policy if decision is not None else None,
        running=doors.coordination.running(session.id),
        pending=pending(waiting, now_ms=uow.ledger.clock()),
        model=model,
        model_error=refused,
    )


def get_detail(uow: UnitOfWork, doors: Doors, label: str) -> SessionDetail:
    """The session labelled `label` (an alias gives its target; a deleted one too) in full."""
    return detail(uow, doors, get_any(uow, label))


def configure(
    uow: UnitOfWork,
    doors: Doors,
    label: str,
    changes: Callable[[SessionRecord], dict[str, Any]],
) -> SessionDetail:
    """Write the columns `changes` makes of the session as it stands (its own queue
    settings, model configuration, title, tags, status); commits, and answers it in full.
    SessionDeleted for a deleted session, ModelConfigError for a model configuration it
    could not run (nothing written)."""
    session = get_any(uow, label)
    if session.status == SessionStatus.DELETED:
        raise SessionDeleted(archived_reason(session))
    values = changes(session)
    if "model_overrides" in values:
        check_model(uow, doors.settings.default_model, session.model_copy(update=values))
    session = uow.ledger.sessions.configure(session.id, values)
    found = detail(uow, doors, session)
    uow.commit()
    return found


class Deletes(Doors, Protocol):
    """What deleting a session takes: the database too, for its own transactions."""

    @property
    def database(self) -> Database: ...


def delete(doors: Deletes, label: str) -> SessionDetail:
    """Delete the session (its own transactions): its waiting input is dropped, a running
    turn asked to stop; deleting it again changes nothing. Answers it in full."""
    with doors.database.reading() as uow:
        session = get_any(uow, label)
    delete_session(doors.database, doors.coordination, session.id)
    with doors.database.reading() as uow:
        found = uow.ledger.sessions.get(session.id)
        assert found is not None  # deleting keeps the row
        return detail(uow, doors, found)
