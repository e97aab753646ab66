"""The sessions feature as a door (the API) uses it: find, list and create sessions, talk to
one, abort and compact it, read its thread, tree and queue, cancel a waiting item, fork a
turn into a new session and roll one back; its detail, settings and deletion
(`nexus.sessions.detail`), its workers (`nexus.sessions.workers`), its kept events
(`nexus.sessions.session_events`), turns (`nexus.sessions.turns`) and usage
(`nexus.sessions.usage`) are re-exported here, so this module is the one way in.

Plain functions over a unit of work (a few over the database, for an operation that takes
its own transactions), returning records; a refusal is a domain error (NotFound,
LabelTaken, SessionArchived, …), never an HTTP answer. A function that writes commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from nexus.agents.tree import session_tree
from nexus.arrival.messages import (
    Doors,
    QueuedMessage,
    new_event_id,
    request_compaction,
    send_checked,
    session_for_label,
)
from nexus.arrival.service import refuse_archived
from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.stream_events import QUEUE_ITEM_DROPPED
from nexus.ledger.enums import Disposition, MessageSource, QueueMode, QueueStatus, SessionOrigin
from nexus.ledger.records import (
    NewSession,
    QueueItemRecord,
    SessionRecord,
    TurnView,
    check_new_label,
)
from nexus.ledger.repository import LabelTaken, LedgerConflict, NotFound
from nexus.queueing.coordination import Coordination
from nexus.queueing.pending import Place, places
from nexus.queueing.running import RunningTurn
from nexus.sessions.detail import SessionDetail, configure, delete, detail, get_detail
from nexus.sessions.entries import SessionEntry, entry, get, get_any, persona_id
from nexus.sessions.rollback import RolledBack, rollback
from nexus.sessions.session_events import event_page, events_after, last_sequence, ledger_position
from nexus.sessions.turns import fork, get_turn, turn_thread
from nexus.sessions.usage import usage_report
from nexus.sessions.workers import cancel_worker_of, list_workers

__all__ = [
    "SessionDetail",
    "SessionEntry",
    "abort",
    "cancel_item",
    "cancel_worker_of",
    "compact",
    "configure",
    "create",
    "delete",
    "detail",
    "entry",
    "event_page",
    "events_after",
    "fork",
    "get",
    "get_any",
    "get_detail",
    "get_turn",
    "last_sequence",
    "ledger_position",
    "list_sessions",
    "list_workers",
    "queue",
    "rollback_session",
    "send",
    "thread",
    "tree",
    "turn_thread",
    "usage_report",
]


class InvalidLabel(ValueError):
    """A label a caller may not give a new session (a system key, say)."""


class NotWaiting(LedgerConflict):
    """The queue item is claimed by a run, or settled: it cannot be cancelled."""


def list_sessions(
    uow: UnitOfWork, *, after: str | None, limit: int, persona: str | None = None
) -> list[SessionEntry]:
    """Up to `limit` sessions in label order after `after`, of one persona (by name:
    NotFound when there is none) or all."""
    owner = persona_id(uow, persona) if persona is not None else None
    rows = uow.ledger.sessions.page(after_label=after, limit=limit, persona_id=owner)
    return [entry(uow, session) for session in rows]


def create(uow: UnitOfWork, label: str, persona: str, queue_mode: QueueMode | None) -> SessionEntry:
    """A new, empty session for `persona` (created when it does not exist yet); commits.
    LabelTaken when a session has the label."""
    if uow.ledger.sessions.resolve(label) is not None:
        raise LabelTaken(f"session {label!r} exists")
    agent = uow.ledger.agents.ensure(persona)
    session = uow.ledger.sessions.create(
        NewSession(
            label=label, persona_id=agent.id, origin=SessionOrigin.USER, queue_mode=queue_mode
        )
    )
    created = entry(uow, session)
    uow.commit()
    return created


def send(
    uow: UnitOfWork,
    doors: Doors,
    label: str,
    content: str,
    *,
    persona: str | None,
    mode: QueueMode | None,
    source: MessageSource,
    model_overrides: Mapping[str, Any] | None,
) -> QueuedMessage:
    """Queue a message for the session `label`, created with `persona` when there is none;
    commits. SessionArchived for an archived or deleted one (a deleted label is not
    silently a new session), InvalidLabel for a label a new session may not take, and
    ModelConfigError for a configuration the session cannot run (nothing written)."""
    if uow.ledger.sessions.resolve(label) is None:
        gone = uow.ledger.sessions.get_by_label(label)
        if gone is not None:  # not silently a new session: say so, and how to get one
            refuse_archived(gone)
        try:  # a missing session is created: under a label a caller may choose
            check_new_label(label)
        except ValueError as error:
            raise InvalidLabel(str(error)) from error
    event_id = new_event_id()
    queued = send_checked(
        uow,
        doors,
        session_for_label(uow, label, persona, event_id),
        content,
        mode=mode,
        source=source,
        model_overrides=model_overrides,
        event_id=event_id,
    )
    uow.commit()
    return queued


def thread(
    uow: UnitOfWork, label: str, limit: int | None = None
) -> tuple[SessionRecord, list[TurnView]]:
    """The session (a deleted one too) and the thread at its head, oldest first: only the
    newest `limit` turns when given."""
    session = get_any(uow, label)
    chain = uow.ledger.threads.read_ancestry(session.thread_id) if session.thread_id else []
    if limit is not None and limit >= 0:
        chain = chain[-limit:] if limit else []
    return session, chain


def rollback_session(
    database: Database,
    coordination: Coordination,
    doorbell: Doorbell,
    label: str,
    turn_id: str,
    *,
    abort: bool,
) -> RolledBack:
    """Move the session's head back to `turn_id` (its own transactions): NotFound,
    TurnRunning (with `abort`, the turn was asked to stop), NotInChain, SessionDeleted."""
    with database.unit_of_work() as uow:
        session = get_any(uow, label)
    return rollback(database, coordination, doorbell, session.id, turn_id, abort=abort)


def abort(uow: UnitOfWork, coordination: Coordination, label: str) -> SessionRecord:
    """Ask the session's running turn to stop (harmless when none runs)."""
    session = get_any(uow, label)
    # The epoch as read now: the turn running now (claimed at it) stops; a later one does not.
    coordination.request_abort(session.id, epoch=session.epoch)
    return session


def compact(
    uow: UnitOfWork, doors: Doors, label: str, instructions: str | None
) -> tuple[SessionRecord, str]:
    """Queue a compaction of the live session `label`; commits. The session and the
    item."""
    session = get(uow, label)
    item_id = request_compaction(
        uow,
        session,
        doors.doorbell,
        instructions=instructions,
        arrivals=doors.coordination,
        queueing=doors.queue_policy,
    )
    uow.commit()
    return session, item_id


@dataclass(frozen=True)
class Tree:
    """The session's turn tree (`nexus.agents.tree`) and the turn it runs now."""

    tree: dict[str, Any]
    running: RunningTurn | None


def tree(uow: UnitOfWork, coordination: Coordination, label: str) -> Tree:
    """The session's turn tree (a deleted session's too) and what it runs now."""
    found = session_tree(uow.ledger, label)
    session = get_any(uow, label)
    return Tree(found, coordination.running(session.id))


@dataclass(frozen=True)
class Queue:
    """A session's queue items, in order, and where each open one stands in line."""

    session: SessionRecord
    items: list[QueueItemRecord]
    places: dict[str, Place]  # an open item's place in line


def queue(uow: UnitOfWork, label: str, *, open_only: bool = False) -> Queue:
    """The session's queue items in order (only those waiting or claimed: `open_only`)."""
    session = get_any(uow, label)
    statuses = [QueueStatus.QUEUED, QueueStatus.CLAIMED] if open_only else None
    items = uow.ledger.queue.for_session(session.id, statuses=statuses)
    return Queue(session, items, places(items, now_ms=uow.ledger.clock()))


def cancel_item(
    uow: UnitOfWork, coordination: Coordination, label: str, item_id: str
) -> QueueItemRecord:
    """Cancel a waiting item of the session; commits, then announces it on the stream.
    NotFound for an item of another session, NotWaiting for one claimed or settled."""
    session = get_any(uow, label)
    item = uow.ledger.queue.get(item_id)
    if item is None or item.session_id != session.id:
        raise NotFound(f"no queue item {item_id!r} in {session.label!r}")
    changed = uow.ledger.queue.dispose(
        [item_id],
        status=QueueStatus.DROPPED,
        disposition=Disposition.CANCELLED,
        detail="cancelled through the API",
        only_waiting=True,
    )
    if not changed:
        raise NotWaiting(f"item {item_id} is {item.status.value}, not waiting")
    cancelled = uow.ledger.queue.get(item_id)
    dropped = {"queue_item_id": item_id, "disposition": "cancelled", "reason": "cancelled"}
    uow.after_commit(partial(coordination.publish, session.id, QUEUE_ITEM_DROPPED, dropped))
    uow.commit()
    assert cancelled is not None
    return cancelled
