"""A session run's failed attempts: back to the queue with a backoff, dead-lettered after
the last attempt (its sender told), and a lost attempt recorded as a failed turn."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import structlog

from nexus.agents.results import report_dead
from nexus.db import Database, UnitOfWork
from nexus.doorbell import Doorbell
from nexus.engine.stream_events import QUEUE_ITEM_DEAD, StreamEvent
from nexus.ids import Clock, new_id
from nexus.ledger.enums import Disposition, QueueStatus, TurnStatus
from nexus.ledger.records import TurnDraft
from nexus.queueing.attempts import (
    DEFAULT_MAX_ATTEMPTS,
    RETRY_BACKOFF_MS,
    out_of_attempts,
    retry_delay_ms,
)
from nexus.queueing.coordination import Coordination
from nexus.queueing.modes import Run

log = structlog.get_logger(__name__)

__all__ = ["DEFAULT_MAX_ATTEMPTS", "RETRY_BACKOFF_MS", "Failures"]


@dataclass(frozen=True)
class Failures:
    """Settles a session run's failed attempts (see the module's docstring)."""

    database: Database
    doorbell: Doorbell
    coordination: Coordination
    clock: Clock
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def settle(self, plan: Run, epoch: int, cause: str, *, crashed: bool = False) -> str:
        """Back to the queue with a backoff, or dead-lettered with its cause after the last
        attempt, so a poison message never blocks the session. `crashed`: the turn raised
        before the turn service recorded anything, so the lost attempt is recorded here.

        Only the items this run still holds (claimed under its epoch), with their attempts
        as they are now: a run that took over owns the rest, and a fenced run may have
        given an attempt back since this run claimed."""
        with self.database.unit_of_work() as uow:
            held = uow.ledger.queue.held([i.id for i in plan.items], epoch=epoch)
            dead = [i.id for i in held if out_of_attempts(i.attempts, self.max_attempts)]
            retry = [i.id for i in held if i.id not in dead]
            if dead:
                # A worker that cannot finish still answers its parent, with the failure;
                # so does any session to whoever sent it a tracked task.
                worker = uow.ledger.sessions.get(plan.items[0].session_id)
                if worker is not None:
                    inputs = [i.event_id for i in plan.items if i.id in dead]
                    lineage = uow.ledger.events.hook_lineage(item_ids=dead)
                    report_dead(
                        uow,
                        self.doorbell,
                        worker,
                        f"dead:{dead[0]}",
                        cause,
                        inputs,
                        lineage=lineage,
                    )
                uow.ledger.queue.dispose(
                    dead,
                    status=QueueStatus.DEAD,
                    disposition=Disposition.DEAD_LETTERED,
                    detail=f"after {self.max_attempts} attempts: {cause}",
                )
            if retry:
                backoff = retry_delay_ms(max(i.attempts for i in held))
                uow.ledger.queue.release(retry, epoch=epoch, retry_at=self.clock() + backoff)
            if crashed and held:
                # Only while this run still owned its claim: a run that took over has
                # recorded the attempt as lost already (`_reclaim`).
                self.record_lost(uow, plan.items[0].session_id, epoch, "turn_crashed", cause)
            if dead:
                reason = f"after {self.max_attempts} attempts: {cause}"
                session_id = plan.items[0].session_id
                announced = [
                    StreamEvent(session_id, QUEUE_ITEM_DEAD, {"queue_item_id": i, "reason": reason})
                    for i in dead
                ]
                uow.after_commit(partial(self.coordination.publish_many, announced))
            uow.commit()
        log.warning("turn_failed", items=len(plan.items), dead=len(dead), cause=cause)
        return "dead" if dead else "failed"

    def record_lost(
        self, uow: UnitOfWork, session_id: str, epoch: int, kind: str, message: str
    ) -> None:
        """A failed turn off the chain for an attempt that ended without an answer."""
        session = uow.ledger.sessions.get(session_id)
        now = self.clock()
        uow.ledger.turns.record_attempt(
            TurnDraft(
                id=new_id(),
                session_id=session_id,
                parent_turn_id=session.thread_id if session else None,
                status=TurnStatus.FAILED,
                started_at=now,
                completed_at=now,
                error_kind=kind,
                error_message=message,
            ),
            epoch=epoch,
        )
