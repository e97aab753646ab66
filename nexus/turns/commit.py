"""A turn's commit: its draft onto the chain with compare-and-set on the head and epoch, or
off it for audit (failed, or fenced by a newer run), with what its tools and hooks write."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.db import Database
from nexus.engine.context_cache import ContextCache
from nexus.engine.credentials import Scrubber
from nexus.engine.drafts import answer_draft
from nexus.engine.kept import keep_turn_events
from nexus.engine.model_config import EffectiveConfig
from nexus.engine.outcomes import CommitHook, reported
from nexus.engine.query import QueryMessage
from nexus.engine.stream import Report, StreamPublisher
from nexus.engine.stream_events import TURN_COMPLETING, StreamEvent
from nexus.engine.tools import AfterTurn, Effect
from nexus.engine.turn import TurnResult
from nexus.ids import Clock
from nexus.ledger.enums import QueueMode, TurnStatus
from nexus.ledger.records import ConsumedItem, EventRecord, SessionRecord
from nexus.pricing import PriceTable


@dataclass(frozen=True)
class TurnInputs:
    """What a turn was asked: its inputs, under which epoch, consuming which queue items."""

    turn_id: str
    queries: tuple[QueryMessage, ...]
    epoch: int
    consumed: tuple[ConsumedItem, ...]
    queue_mode: QueueMode | None
    source: EventRecord | None


@dataclass(frozen=True)
class TurnRun:
    """One run of the model loop: its result, and what its tools left for the commit."""

    result: TurnResult
    effects: list[Effect]
    after: AfterTurn


@dataclass(frozen=True)
class TurnCommit:
    """Where a turn commits, who hears of it, and how its usage is priced."""

    database: Database
    publisher: StreamPublisher
    contexts: ContextCache
    hooks: Sequence[CommitHook]
    prices: PriceTable
    clock: Clock

    def commit(
        self,
        session: SessionRecord,
        inputs: TurnInputs,
        ran: TurnRun,
        started: int,
        config: EffectiveConfig | None,
        report: Report,
        scrubber: Scrubber | None = None,
    ) -> str:
        """Commit (or record) the turn: `committed`, `fenced` or `failed`. What a committed
        one reports, and the doorbells its commit rang, are added to `report`, for the
        caller to send after this commit."""
        result, epoch = ran.result, inputs.epoch
        # Watchers see the commit phase (`running.step` "completing"); posted, so the commit
        # does not wait for the stream. The last model call's held `step.generated` rides
        # with it instead of with the commit's report.
        completing = {"turn_id": inputs.turn_id, "status": result.status.value}
        self.publisher.post_many([StreamEvent(session.id, TURN_COMPLETING, completing)])
        draft = answer_draft(
            turn_id=inputs.turn_id,
            session_id=session.id,
            parent_turn_id=session.thread_id,
            result=result,
            started=started,
            completed=self.clock(),
            consumed=inputs.consumed,
            queue_mode=inputs.queue_mode,
            queries=inputs.queries,
            config=config,
            prices=self.prices,
        )
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
                for effect in ran.effects:
                    effect(uow, draft.id)
                # The event the turn answered, if the run read the one the draft names.
                source = inputs.source
                if source is not None and source.id != draft.source_event_id:
                    source = None
                for hook in self.hooks:
                    hook(uow, session, draft.id, result, source)
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
