"""Deleting a session: a status, not a removal.

A deleted session keeps every row it wrote (turns, messages, pointer history) and stays
readable by label until a new session takes the label, which deleting frees. It takes no
work from then on: its waiting queue items are dropped (disposition `cancelled`, detail
`session deleted`), a turn running in it is asked to stop (its partial answer is kept as
an aborted turn), and new input is refused (`SessionDeleted`).
"""

from __future__ import annotations

from dataclasses import dataclass

from nexus.db import Database
from nexus.ledger.enums import Disposition, QueueStatus, SessionStatus
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository import NotFound
from nexus.queueing.coordination import Coordination

DELETED_DETAIL = "session deleted"


@dataclass(frozen=True)
class Deleted:
    session: SessionRecord  # as deleting left it
    dropped: int  # waiting items given their disposition
    already: bool  # it was deleted before


def delete_session(database: Database, coordination: Coordination, session_id: str) -> Deleted:
    """Mark the session deleted and settle what waits for it, in one transaction; then ask
    a running turn to stop. Deleting a deleted session changes nothing."""
    with database.unit_of_work() as uow:
        sessions = uow.ledger.sessions
        epoch = sessions.lock(session_id)
        session = sessions.get(session_id)
        if session is None:
            raise NotFound(f"no session with id {session_id!r}")
        if session.status == SessionStatus.DELETED:
            return Deleted(session, 0, already=True)
        waiting = uow.ledger.queue.for_session(session_id, statuses=[QueueStatus.QUEUED])
        dropped = uow.ledger.queue.dispose(
            [item.id for item in waiting],
            status=QueueStatus.DROPPED,
            disposition=Disposition.CANCELLED,
            detail=DELETED_DETAIL,
            only_waiting=True,
        )
        deleted = sessions.configure(session_id, {"status": SessionStatus.DELETED})
        uow.commit()
    # The turn claimed at this epoch (if one runs) stops at its next chunk or boundary.
    coordination.request_abort(session_id, epoch=epoch)
    return Deleted(deleted, dropped, already=False)
