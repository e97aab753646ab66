"""The router run: drain waiting events in batches, then ring their sessions or run one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import structlog

from nexus.access.policy import Policy
from nexus.arrival.service import ArrivalSignals
from nexus.arrival.settings import QueuePolicy
from nexus.db import Database, UnitOfWork
from nexus.doorbell import ROUTER_PENDING, Doorbell
from nexus.engine.query import QueryMessage
from nexus.engine.stream_events import StreamEvent
from nexus.ingest.batch import ROUTE_BATCH, ProcessedEvent, route_waiting
from nexus.ledger.records import EventRecord, QueueItemRecord
from nexus.sessions.claims import InlineClaim

log = structlog.get_logger(__name__)


class InlineRuns(Protocol):
    """The session run, as the router drives one inline (`nexus.sessions.runner`)."""

    def claim_inline(
        self,
        uow: UnitOfWork,
        session_id: str,
        *,
        alone: tuple[QueueItemRecord, EventRecord] | None = None,
    ) -> InlineClaim | None: ...

    def run(self, session_id: str, *, claimed: InlineClaim | None = None) -> object: ...


class RouterSignals(ArrivalSignals, Protocol):
    """The coordination the router needs: signals for running turns, and its drain flag."""

    def lower_flag(self, name: str) -> None: ...


class _Arrivals:
    """The router's signals to running turns, less those to a session this run claimed
    inline: none of its turns runs (the run holds its lease, and the claim's new epoch
    fences one that lost the lease without knowing), and the claimed turn answers the
    message itself. An abort or steer for it would cost a round trip, and its turn, claimed at a
    later epoch, would ignore it. What is announced on its stream is held for the run to send with
    its first publish (`held`)."""

    def __init__(self, signals: ArrivalSignals) -> None:
        self._signals = signals
        self.claimed: str | None = None
        self.held: list[StreamEvent] = []

    def request_abort(self, session_id: str, *, epoch: int) -> None:
        if session_id != self.claimed:
            self._signals.request_abort(session_id, epoch=epoch)

    def steer(self, session_id: str, message: QueryMessage, *, epoch: int) -> None:
        if session_id != self.claimed:
            self._signals.steer(session_id, message, epoch=epoch)

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        self.held.extend(e for e in events if e.session_id == self.claimed)
        others = [e for e in events if e.session_id != self.claimed]
        if others:
            self._signals.publish_many(others)


@dataclass
class EventRouter:
    """One router run (`nexus.event.process`): every waiting event, `batch` at a time.

    Each batch is one transaction. After it commits, every session it queued work for is
    rung once; on the last batch, one of them is run here instead when `runs` is given (an
    idle session's turn without another broker hop, its first claim made in the batch's own
    transaction; a busy one is left to its holder, which re-checks its queue when it
    releases).
    """

    database: Database
    policies: Sequence[Policy]
    doorbell: Doorbell
    signals: RouterSignals
    queueing: QueuePolicy
    after_routing: Callable[[ProcessedEvent], object] = lambda _: None
    runs: InlineRuns | None = None
    batch: int = ROUTE_BATCH

    def drain(self, rang_for: str | None = None) -> list[ProcessedEvent]:
        """Route what waits; `rang_for` is the event whose ring started this run."""
        # Lowered before the first read: an event committed from here on rings a new run,
        # and every event committed before is in this run's reads.
        self.signals.lower_flag(ROUTER_PENDING)
        routed: list[ProcessedEvent] = []
        while True:
            claimed: InlineClaim | None = None
            arrivals = _Arrivals(self.signals)
            with self.database.unit_of_work() as uow:
                drained = route_waiting(
                    uow,
                    self.policies,
                    arrivals=arrivals,
                    queueing=self.queueing,
                    limit=self.batch,
                )
                last = len(drained.events) < self.batch
                inline = drained.sessions[-1] if last and drained.sessions and self.runs else None
                if inline is not None and self.runs is not None:
                    claimed = self.runs.claim_inline(uow, inline, alone=drained.alone.get(inline))
                    arrivals.claimed = claimed.session_id if claimed is not None else None
                try:
                    uow.commit()
                except BaseException:
                    if claimed is not None:
                        claimed.lease.release()
                    raise
            routed.extend(drained.events)
            for event in drained.events:
                log.info(
                    "event_routed",
                    event_id=event.event_id,
                    disposition=event.disposition,
                    session=event.session_label,
                )
            for session_id in drained.sessions:
                if session_id != inline:
                    self.doorbell.session_has_work(session_id)
            if inline is not None and self.runs is not None:
                if claimed is not None and arrivals.held:
                    claimed = replace(claimed, announce=tuple(arrivals.held))
                self.runs.run(inline, claimed=claimed)
            # Hooks after the turn this run owed: a slow or broken hook delays nothing a
            # person is waiting for. Only events that owe them an evaluation: one whose
            # obligation this run never gets to (it died in the turn) is re-rung by the relay.
            for event in drained.events:
                if event.event_id in drained.owing_hooks:
                    self.after_routing(event)
            if last:
                break
        if rang_for is not None and all(e.event_id != rang_for for e in routed):
            self._ring_if_still_owed(rang_for)
        return routed

    def _ring_if_still_owed(self, event_id: str) -> None:
        """The event this ring was for was routed before: by another run, or by this same
        ring delivered again because the process running it died, perhaps in the middle of
        the turn it ran inline. Its session, if that input is still unsettled, is rung, so
        the turn resumes without waiting for the timer."""
        with self.database.unit_of_work() as uow:
            session_id = uow.ledger.queue.session_still_owing(event_id)
        if session_id is not None:
            self.doorbell.session_has_work(session_id)
