"""Compaction's one entry point: every kind of it, and its commit (docs/engine.md, "Compaction").

Four kinds, one path: proactive (before a turn whose context reached the threshold),
overflow (the model refused the context as too long), asked for (`compact_context`, after
its turn commits) and manual (`/compact`, or a queued `compact` command from the API or
CLI). Each sizes the cut (`drafts.size_compaction`), writes the summary with one model call
(`summarize`) and commits the compaction turn with compare-and-set on the head and epoch,
like any turn: a stale run is fenced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from nexus.compaction import policy
from nexus.compaction.drafts import compaction_draft, size_compaction
from nexus.compaction.summarize import summarize_with
from nexus.db import Database
from nexus.engine.context import AssembledContext
from nexus.engine.model import ModelPort
from nexus.engine.model_config import EffectiveConfig
from nexus.engine.outcomes import CompactionOutcome, Snapshot, TurnOutcome, reported
from nexus.engine.query import QueryMessage
from nexus.engine.reading import SessionReader
from nexus.engine.stream import Report, StreamPublisher
from nexus.engine.stream_events import CONTEXT_COMPACTING, StreamEvent
from nexus.engine.tools import CompactionAsk
from nexus.ids import Clock, new_id
from nexus.ledger.enums import CompactionTrigger, Disposition, QueueStatus
from nexus.ledger.records import ConsumedItem, QueueItemRecord
from nexus.pricing import PriceTable

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Prepared:
    """The context a turn is about to send, after any compaction it needed first."""

    snapshot: Snapshot
    assembled: AssembledContext | None  # None: fenced, the turn must not run
    compactions: tuple[CompactionOutcome, ...] = ()


@dataclass(frozen=True)
class CompactionService:
    """Compacts a session's context under a run's epoch; see the module's docstring."""

    reader: SessionReader
    database: Database
    model_for: Callable[[str], ModelPort]
    publisher: StreamPublisher
    clock: Clock
    prices: PriceTable
    # The model that writes summaries (NEXUS_SUMMARY_MODEL); None: the turn's.
    summary_model: str | None = None

    # -- asked for by name -------------------------------------------------------------------

    def compact(
        self,
        session_id: str,
        *,
        epoch: int,
        trigger: CompactionTrigger = CompactionTrigger.MANUAL,
        instructions: str | None = None,
        consumed: Sequence[ConsumedItem] = (),
    ) -> CompactionOutcome:
        """Compact the session as it is now, consuming `consumed` in the same commit."""
        return self._compact(
            self.reader.snapshot(session_id),
            epoch=epoch,
            trigger=trigger,
            target_ratio=policy.PROACTIVE_TARGET,
            instructions=instructions,
            consumed=consumed,
        )

    def queued(
        self, session_id: str, item: QueueItemRecord, *, epoch: int, disposition: Disposition
    ) -> CompactionOutcome:
        """A `compact` command from the queue (the API or CLI asked), run by the session's
        runner under its lease: the compaction turn consumes the item in its own commit.
        When none is committed because it was fenced, the runner hands the item back (with
        the attempt its claim counted); with nothing to compact, it is answered here."""
        instructions = item.payload.get("instructions")
        outcome = self.compact(
            session_id,
            epoch=epoch,
            instructions=instructions if isinstance(instructions, str) else None,
            consumed=[ConsumedItem(queue_item_id=item.id, disposition=disposition)],
        )
        if outcome.status == "committed":
            log.info("compaction_committed", session_id=session_id, turn_id=outcome.turn_id)
            return outcome
        if outcome.status == "fenced":
            return outcome
        with self.database.unit_of_work() as uow:  # nothing in context to summarise
            uow.ledger.queue.dispose(
                [item.id],
                status=QueueStatus.DONE,
                disposition=Disposition.CONSUMED,
                detail="nothing to compact: the session has no turns in context",
            )
            uow.commit()
        return outcome

    def slash_command(
        self,
        session_id: str,
        queries: Sequence[QueryMessage],
        *,
        epoch: int,
        consumed: Sequence[ConsumedItem],
    ) -> TurnOutcome | None:
        """`/compact …` as a turn's only query compacts instead of answering; None when the
        queries are anything else."""
        manual = policy.manual_compaction_request(queries[0].text) if len(queries) == 1 else None
        if manual is None:
            return None
        outcome = self.compact(
            session_id, epoch=epoch, instructions=manual.instructions, consumed=consumed
        )
        return TurnOutcome(
            status="fenced" if outcome.status == "fenced" else "committed",
            turn_id=outcome.turn_id or "",
            result=None,
            compactions=(outcome,),
        )

    # -- around a turn -----------------------------------------------------------------------

    def before_turn(
        self,
        snapshot: Snapshot,
        queries: Sequence[QueryMessage],
        config: EffectiveConfig,
        *,
        epoch: int,
        overflowed: bool = False,
    ) -> Prepared:
        """The turn's context, compacted first when it reached the proactive threshold;
        `overflowed` (the model says the context is too long after all): compacted hard,
        for one retry."""
        if overflowed:
            trigger, target_ratio = CompactionTrigger.OVERFLOW, policy.OVERFLOW_TARGET
        else:
            assembled = self.reader.assemble(snapshot, queries, config)
            if not policy.should_compact(assembled.tokens, assembled.window):
                return Prepared(snapshot, assembled)
            trigger, target_ratio = CompactionTrigger.PROACTIVE, policy.PROACTIVE_TARGET
        done = self._compact(snapshot, epoch=epoch, trigger=trigger, target_ratio=target_ratio)
        if done.status == "fenced":
            return Prepared(snapshot, None, (done,))
        snapshot = self.reader.snapshot(snapshot.session.id)
        return Prepared(snapshot, self.reader.assemble(snapshot, queries, config), (done,))

    def asked(
        self, session_id: str, turn_id: str, asked: CompactionAsk, *, epoch: int, report: Report
    ) -> tuple[CompactionOutcome, ...]:
        """The compaction `compact_context` asked for, now that its turn is on the chain.

        Under the turn's epoch and in the same run, so the session still has one writer and
        a newer run fences it like any commit. Trigger `manual` (a tool or the slash
        command); the turn's own events go out first, so watchers see them in order. The
        turn is committed: a failure here is logged, never raised, so it keeps its report."""
        try:
            report.send(self.publisher)
            return (
                self._compact(
                    self.reader.snapshot(session_id),
                    epoch=epoch,
                    trigger=CompactionTrigger.MANUAL,
                    target_ratio=policy.PROACTIVE_TARGET,
                    instructions=asked.instructions,
                    metadata={
                        "requested_by": {
                            "tool": "compact_context",
                            "turn_id": turn_id,
                            "tool_call_id": asked.call_id,
                        }
                    },
                ),
            )
        except Exception:
            log.exception("asked_compaction_failed", session_id=session_id, turn_id=turn_id)
            return ()

    # -- the one path ------------------------------------------------------------------------

    def _compact(
        self,
        snapshot: Snapshot,
        *,
        epoch: int,
        trigger: CompactionTrigger,
        target_ratio: float,
        instructions: str | None = None,
        consumed: Sequence[ConsumedItem] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> CompactionOutcome:
        context = snapshot.context
        if context.head is None or not context.turns:
            return CompactionOutcome(status="nothing")
        config = self.reader.plain_config(snapshot)
        sizing = size_compaction(
            context,
            self.reader.assemble(snapshot, (), config),
            trigger=trigger,
            target_ratio=target_ratio,
        )
        if sizing is None:
            return CompactionOutcome(status="nothing")
        # Watchers see it (`running.step` "compacting"): a summary takes a model call.
        self.publisher.post_many(
            [
                StreamEvent(
                    snapshot.session.id,
                    CONTEXT_COMPACTING,
                    {"trigger": trigger.value, "turns": len(sizing.plan.summarized)},
                )
            ]
        )
        summarized = [v for v in context.turns if v.turn.id in set(sizing.plan.summarized)]
        prior = context.compaction.summary if context.compaction is not None else None
        # A per-persona summary model would be read here (say, from its model config).
        model_name = self.summary_model or config.model
        started = self.clock()
        summary, provider = summarize_with(
            self.model_for, model_name, prior=prior, turns=summarized, instructions=instructions
        )
        turn_id = new_id()
        draft = compaction_draft(
            turn_id=turn_id,
            session_id=snapshot.session.id,
            head_turn_id=context.head.turn_id,
            sizing=sizing,
            summary=summary,
            model_name=model_name,
            provider=provider,
            trigger=trigger,
            started=started,
            completed=self.clock(),
            instructions=instructions,
            consumed=consumed,
            metadata=metadata,
            prices=self.prices,
        )
        with self.database.unit_of_work() as uow:
            outcome = uow.ledger.turns.commit(draft, epoch=epoch)
            uow.commit()
        if outcome.status == "committed":
            self.publisher.publish_many(reported(draft, outcome, "compaction"))
        return CompactionOutcome(
            status=outcome.status,
            turn_id=turn_id,
            summary=summary.text,
            fallback=summary.fallback,
            turns_summarized=len(sizing.plan.summarized),
        )
