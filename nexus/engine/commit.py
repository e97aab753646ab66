"""A turn's commit: its draft onto the chain with compare-and-set on the head and epoch, or
off it for audit (failed, or fenced by a newer run), with what its tools and hooks write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.db import Database
from nexus.engine.context_cache import ContextCache
from nexus.engine.credentials import Scrubber
from nexus.engine.kept import keep_turn_events
from nexus.engine.outcomes import CommitHook, reported
from nexus.engine.stream import Report, StreamEvent, StreamPublisher
from nexus.engine.tools import Effect
from nexus.engine.turn import TurnResult
from nexus.ledger.enums import TurnStatus
from nexus.ledger.records import EventRecord, SessionRecord, TurnDraft


@dataclass(frozen=True)
class TurnCommit:
    """Where a turn commits, and who hears of it."""

    database: Database
    publisher: StreamPublisher
    contexts: ContextCache
    hooks: Sequence[CommitHook]

    def commit(
        self,
        draft: TurnDraft,
        result: TurnResult,
        *,
        session: SessionRecord,
        epoch: int,
        report: Report,
        effects: Sequence[Effect] = (),
        source: EventRecord | None = None,
        scrubber: Scrubber | None = None,
    ) -> str:
        """Commit (or record) the turn: `committed`, `fenced` or `failed`. What a committed
        one reports, and the doorbells its commit rang, are added to `report`, for the
        caller to send after this commit."""
        kept: list[StreamEvent] = []
        with self.database.unit_of_work() as uow:
            if result.status == TurnStatus.FAILED:
                # Off the chain, kept for audit; the input stays queued for another attempt.
                uow.ledger.turns.record_attempt(draft, epoch=epoch)
                uow.commit()
                return "failed"
            outcome = uow.ledger.turns.commit(draft, epoch=epoch)
            if outcome.status == "fenced":
                # A newer run owns the session: keep this attempt for audit, off the chain
                # (invariant 3, docs/architecture.md); its inputs stay with the newer run.
                superseded = draft.model_copy(
                    update={
                        "status": TurnStatus.SUPERSEDED,
                        "consumed": (),
                        "error_message": outcome.reason,
                    }
                )
                uow.ledger.turns.record_attempt(superseded, epoch=epoch)
            else:
                # What the turn's tools asked of the ledger lands with the turn, or not at all.
                for effect in effects:
                    effect(uow, draft.id)
                # The event the turn answered, if the run read the one the draft names.
                known = (
                    source if source is not None and source.id == draft.source_event_id else None
                )
                for hook in self.hooks:
                    hook(uow, session, draft.id, result, known)
                events = reported(draft, outcome, result.status.value)
                kept = keep_turn_events(
                    uow, report, draft.id, events, self.publisher, scrubber=scrubber
                )
            uow.commit(hold=report.rings)
        if outcome.status == "committed":
            if outcome.view is not None:
                self.contexts.advance(session.id, outcome.view)
            report.events.extend(kept)
        return outcome.status
