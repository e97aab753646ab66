"""How a turn opens and closes on its session's stream: `session.started` rides with its
first publish, and how it ended (`session.completed`, or `session.failed` for a failed or
fenced attempt) goes out with what its commit reports, one publish, then its doorbells."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.db.unit_of_work import run_after_commit
from nexus.engine.outcomes import TurnOutcome
from nexus.engine.stream import (
    KeepingPublisher,
    KeptEvents,
    LeadingPublisher,
    Report,
    StreamPublisher,
    worker_name,
)
from nexus.engine.stream_events import (
    SESSION_COMPLETED,
    SESSION_FAILED,
    SESSION_STARTED,
    StreamEvent,
)
from nexus.ledger.enums import TurnStatus


@dataclass(frozen=True)
class TurnFrame:
    """The publisher a turn runs with, and the report its commit fills."""

    session_id: str
    publisher: LeadingPublisher
    report: Report

    @classmethod
    def open(
        cls,
        publisher: StreamPublisher,
        session_id: str,
        turn_id: str,
        *,
        inputs: int,
        leading: Sequence[StreamEvent],
        started_at: int,
    ) -> TurnFrame:
        """`leading` goes out before `session.started`, with the turn's first publish (the
        model call's `step.started`): one round trip for all. The turn's own events (not
        the leading ones) are marked as they go and kept by its commit, in the ledger
        (docs/operations.md, "Session events")."""
        started = {
            "inputs": inputs,
            "turn_id": turn_id,
            "worker": worker_name(),
            "started_at": started_at,
        }
        kept = KeptEvents(session_id, turn_id, skip=len(leading))
        leading_publisher = LeadingPublisher(
            KeepingPublisher(publisher, kept),
            [*leading, StreamEvent(session_id, SESSION_STARTED, started)],
        )
        return cls(session_id, leading_publisher, Report(kept=kept))

    def abandon(self) -> None:
        """The turn raised: watchers still learn it started (the runner reports the rest),
        and a commit made before the failure still rings."""
        try:
            self.publisher.flush()
        finally:
            run_after_commit(self.report.rings)

    def close(self, outcome: TurnOutcome) -> None:
        """How the turn ended, with what its commit reports (and `session.started`, if
        nothing went out yet), then the doorbells its commit rang."""
        ended = outcome.status == "committed" and (
            outcome.result is None or outcome.result.status != TurnStatus.FAILED
        )
        self.report.events.append(
            self.report.ending
            or StreamEvent(
                self.session_id,
                SESSION_COMPLETED if ended else SESSION_FAILED,
                {"turn_id": outcome.turn_id, "status": outcome.status},
            )
        )
        self.report.send(self.publisher)
