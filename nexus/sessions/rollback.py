"""Rolling a session back: its head moved to an earlier turn of its own chain.

Nothing is deleted. The turns after the new head stay in the ledger and readable (the tree
shows the abandoned branch); the move is a row in the pointer history (`session_history`,
reason `rollback`), as a turn commit's and a fork's are.

The move is made as a run makes a commit: holding the session's lease (so no turn runs
meanwhile), and fenced by a compare-and-set on head and epoch that also bumps the epoch,
so a run that lost its lease cannot commit on top of the old head afterwards. While a
turn runs the lease is held: the rollback is refused (`TurnRunning`), and with `abort` the
running turn is asked to stop first (the abort signal, at the session's epoch); the caller
retries once it has stopped. That keeps a rollback a short transaction that never waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from nexus.db import Database
from nexus.doorbell import Doorbell
from nexus.ledger.enums import OPEN_QUEUE_STATUSES, SessionStatus
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository import LedgerConflict, NotFound, SessionDeleted
from nexus.ledger.repository.session_lineage import ROLLBACK
from nexus.queueing.coordination import Coordination

# How long the rollback holds the session's lease at most: one short transaction.
LEASE_MS = 30_000


class TurnRunning(LedgerConflict):
    """A turn runs in the session (its lease is held): nothing was moved."""


class NotInChain(LedgerConflict):
    """The turn is not on the session's own chain behind its head: nothing was moved."""


@dataclass(frozen=True)
class RolledBack:
    session: SessionRecord  # as the rollback left it
    previous_head: str | None
    moved: bool  # False: the turn was the head already


def refusal(
    session: SessionRecord, turn_id: str, turn_session_id: str, chain: Sequence[str]
) -> str | None:
    """Why `session` cannot be rolled back to `turn_id` (a turn made in `turn_session_id`),
    given the turn ids of its chain from the root to its head; None when it can. Only a
    turn the session made itself, on the chain behind its head, is a place to go back to
    (a fork's inherited turns are its parent's)."""
    if session.status == SessionStatus.DELETED:
        return f"session {session.label!r} was deleted: its head no longer moves"
    if turn_session_id != session.id:
        return (
            f"turn {turn_id} was made in another session, not in {session.label!r}: only a "
            "turn of the session's own chain is a place to roll back to"
        )
    if turn_id not in chain:
        return (
            f"turn {turn_id} is not on the chain behind the head of {session.label!r} "
            "(it is on an abandoned branch, or off the chain: failed or superseded)"
        )
    return None


def rollback(
    database: Database,
    coordination: Coordination,
    doorbell: Doorbell,
    session_id: str,
    turn_id: str,
    *,
    abort: bool = False,
) -> RolledBack:
    """Move the session's head back to `turn_id`. Raises NotFound (no such session or
    turn), SessionDeleted, NotInChain, or TurnRunning (after asking the turn to stop, with
    `abort`): nothing changes then."""
    lease = coordination.acquire(f"session:{session_id}", LEASE_MS)
    if lease is None:
        _running(database, coordination, session_id, abort=abort)
    try:
        with database.unit_of_work() as uow:
            sessions = uow.ledger.sessions
            epoch = sessions.lock(session_id)
            session = sessions.get(session_id)
            assert session is not None  # locked just above
            if session.status == SessionStatus.DELETED:
                raise SessionDeleted(f"session {session.label!r} was deleted: it cannot roll back")
            turn = uow.ledger.threads.get_thread(turn_id)
            if turn is None:
                if uow.ledger.threads.get_turn(turn_id) is None:
                    raise NotFound(f"no turn {turn_id!r}")
                raise NotInChain(refusal(session, turn_id, "", []) or "")
            if turn_id == session.thread_id:
                return RolledBack(session, session.thread_id, moved=False)
            head = session.thread_id
            chain = (
                [view.turn.id for view in uow.ledger.threads.read_ancestry(head)] if head else []
            )
            why = refusal(session, turn_id, turn.session_id, chain)
            if why is not None:
                raise NotInChain(why)
            abandoned = chain[chain.index(turn_id) + 1 :]
            if not sessions.move_head(
                session_id,
                turn_id,
                epoch=epoch,
                expected=head,
                reason=ROLLBACK,
                abandoned=abandoned,
            ):
                raise TurnRunning(f"session {session.label!r} moved meanwhile; try again")
            waiting = uow.ledger.queue.for_session(session_id, statuses=list(OPEN_QUEUE_STATUSES))
            moved = sessions.get(session_id)
            assert moved is not None
            uow.commit()
    finally:
        lease.release()
    if waiting:
        # What arrived while the lease was held found it taken: its ring is owed now.
        doorbell.session_has_work(session_id)
    return RolledBack(moved, head, moved=True)


def _running(
    database: Database, coordination: Coordination, session_id: str, *, abort: bool
) -> NoReturn:
    """Refuse: a run holds the session; with `abort`, ask its turn to stop first."""
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(session_id)
    if session is None:
        raise NotFound(f"no session with id {session_id!r}")
    if abort:
        coordination.request_abort(session_id, epoch=session.epoch)
        raise TurnRunning(
            f"a turn is running in {session.label!r}: it was asked to stop; retry the "
            "rollback once it has (its partial answer is kept as an aborted turn)"
        )
    raise TurnRunning(
        f"a turn is running in {session.label!r}: retry once it is done, or ask with "
        "abort to stop it first"
    )
