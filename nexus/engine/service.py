"""The engine's entry point: read the ledger, run a turn or a compaction, commit it.

No database transaction is held open across a model call: a run reads in one unit of work,
talks to the model with none open, and commits in another with compare-and-set on the head
and the epoch — so a slow model never holds a row lock, and a stale run is fenced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from nexus.db import Database
from nexus.db.unit_of_work import run_after_commit
from nexus.engine import compaction_policy
from nexus.engine.attachments import AttachmentSource, WithAttachments, file_counts
from nexus.engine.capabilities import CapabilityRegistry
from nexus.engine.context import AssembledContext, assemble
from nexus.engine.context_cache import ContextCache
from nexus.engine.credentials import NoSecrets, Scrubber, SecretSource
from nexus.engine.drafts import answer_draft, compaction_draft, refused_result, size_compaction
from nexus.engine.kept import keep_turn_events
from nexus.engine.model import ModelPort
from nexus.engine.model_config import (
    DEFAULT_MAX_TOKENS,
    EffectiveConfig,
    ModelConfigError,
    merge,
    parse,
    persona_layer,
    resolve,
)
from nexus.engine.outcomes import (
    CommitHook,
    CompactionOutcome,
    Snapshot,
    TurnOutcome,
    reported,
)
from nexus.engine.permissions import read_permissions
from nexus.engine.prefix_sums import PrefixSums
from nexus.engine.query import QueryMessage
from nexus.engine.signals import NoSignals, TurnSignals
from nexus.engine.stream import (
    CONTEXT_COMPACTING,
    SESSION_COMPLETED,
    SESSION_FAILED,
    SESSION_STARTED,
    TURN_COMPLETING,
    KeepingPublisher,
    KeptEvents,
    LeadingPublisher,
    NullPublisher,
    Report,
    StreamEvent,
    StreamPublisher,
    worker_name,
)
from nexus.engine.summarize import summarize_with
from nexus.engine.toolbox import Toolbox
from nexus.engine.tools import AfterTurn, CompactionAsk, Effect, ToolContext, ToolRegistry
from nexus.engine.turn import TurnMachine, TurnResult
from nexus.engine.workspace import Workspace
from nexus.ids import Clock, new_id, now_ms
from nexus.ledger.enums import (
    CompactionTrigger,
    QueueMode,
    TurnStatus,
)
from nexus.ledger.records import (
    ConsumedItem,
    EventRecord,
)
from nexus.ledger.repository.snapshots import SessionSnapshot
from nexus.pricing import BUILTIN, PriceTable

log = structlog.get_logger(__name__)


@dataclass
class Engine:
    database: Database
    model_for: Callable[[str], ModelPort]
    default_model: str
    tools: ToolRegistry
    capabilities: CapabilityRegistry
    signals: TurnSignals = field(default_factory=NoSignals)
    publisher: StreamPublisher = field(default_factory=NullPublisher)
    clock: Clock = now_ms
    max_tool_iterations: int = 8
    max_tokens: int = DEFAULT_MAX_TOKENS
    # Caps the context below the model's window (cost control; small in tests).
    context_window: int | None = None
    # Run inside the transaction that commits a turn (say, a worker reporting to its parent).
    commit_hooks: tuple[CommitHook, ...] = ()
    # Shared by the copies a session run makes (dataclasses.replace keeps the reference).
    contexts: ContextCache = field(default_factory=ContextCache)
    # Prices each turn's usage as it commits (NEXUS_PRICES merges over the built-in table).
    prices: PriceTable = BUILTIN
    # Where a tool's credentials are looked up, at call time (see nexus/engine/credentials.py).
    secrets: SecretSource = field(default_factory=NoSecrets)
    # The model that writes compaction summaries (NEXUS_SUMMARY_MODEL); None: the turn's.
    summary_model: str | None = None
    # Layer 1 of the context: AGENTS.md and identity files (none: no workspace layer).
    workspace: Workspace | None = None
    # Fetches files the model may read but not open by URL itself (they need a token).
    attachments: AttachmentSource | None = None
    # Which requests hold files: shared by the session run's copies, like `contexts`.
    file_counts: PrefixSums = field(default_factory=file_counts)

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self, session_id: str) -> Snapshot:
        """The session, its persona and capabilities, and its context: one round trip, then
        only the turns this process has not read yet (see ContextCache)."""
        with self.database.reading() as uow:
            read = uow.ledger.snapshots.read(session_id, known=self.contexts.get(session_id))
        return self.taken(read)

    def taken(self, read: SessionSnapshot) -> Snapshot:
        """A snapshot read elsewhere (with the run's claim), kept like one read here: the
        context is remembered for the session's next read."""
        session_id = read.session.id
        self.contexts.put(session_id, read.context)
        context = read.context
        return Snapshot(
            session=read.session,
            persona=read.persona,
            capability_ids=read.capability_ids,
            context=context,
            anchor_depth=context.anchor_depth if context.compaction is not None else None,
        )

    def _config(self, snapshot: Snapshot, queries: Sequence[QueryMessage] = ()) -> EffectiveConfig:
        """The model configuration: the queries' own (later over earlier), then the
        session's, the persona's and the deployment's, field by field. Raises
        ModelConfigError when the layers together make one the API would refuse."""
        persona = snapshot.persona
        return resolve(
            turn=merge(*(parse(query.model_overrides) for query in queries)),
            session=parse(snapshot.session.model_overrides),
            persona=persona_layer(persona),
            default_model=self.default_model,
            default_max_tokens=self.max_tokens,
        )

    def _plain_config(self, snapshot: Snapshot) -> EffectiveConfig:
        """The session's configuration for a summary call, which never thinks: a layer
        that no longer fits the others must not stop a compaction."""
        try:
            config = self._config(snapshot)
        except ModelConfigError:
            config = resolve(default_model=self.default_model, default_max_tokens=self.max_tokens)
        return dataclasses.replace(config, thinking=None)

    def _summary_model_name(self, config: EffectiveConfig) -> str:
        # A per-persona summary model would be read here (say, from its model config).
        return self.summary_model or config.model

    def _toolbox(
        self, snapshot: Snapshot, scrubber: Scrubber | None = None
    ) -> tuple[Toolbox, tuple[str, ...]]:
        resolved = self.capabilities.resolve(list(snapshot.capability_ids))
        toolbox = Toolbox(
            self.tools,
            read_permissions(snapshot.persona.permissions),
            resolved.tool_names,
            secrets=self.secrets,
            scrubber=scrubber,
        )
        return toolbox, resolved.prompt_additions

    def _assemble(
        self,
        snapshot: Snapshot,
        queries: Sequence[QueryMessage],
        config: EffectiveConfig | None = None,
    ) -> AssembledContext:
        config = config or self._config(snapshot, queries)
        toolbox, additions = self._toolbox(snapshot)
        assembled = assemble(
            persona=snapshot.persona,
            model=config.model,
            context=snapshot.context,
            queries=queries,
            tools=toolbox.visible_specs(),
            prompt_additions=additions,
            anchor_depth=snapshot.anchor_depth,
            max_tokens=config.max_tokens,
            window=self.context_window,
            render=self.contexts.rendered,
            merged=self.contexts.merged,
            session=snapshot.session,
            workspace=(
                self.workspace.layer(snapshot.persona.name) if self.workspace is not None else ""
            ),
        )
        request = dataclasses.replace(
            assembled.request, thinking=config.thinking, temperature=config.temperature
        )
        return dataclasses.replace(assembled, request=request)

    # -- turns -------------------------------------------------------------------------------

    def run_turn(
        self,
        session_id: str,
        queries: Sequence[QueryMessage],
        *,
        epoch: int,
        consumed: Sequence[ConsumedItem] = (),
        queue_mode: QueueMode | None = None,
        source: EventRecord | None = None,
        leading: Sequence[StreamEvent] = (),
        read: SessionSnapshot | None = None,
    ) -> TurnOutcome:
        """Answer `queries` in the session; `/compact …` as the only query compacts instead.
        `source` is the event of the first query that has one, when the caller read it: the
        commit hooks get it instead of reading it back. `leading` is sent on the stream
        before `session.started`, with the turn's first publish. `read` is the session as
        the run's claim left it (`snapshots.claim`), read with the claim: not read again.

        The stream tells watchers the session is busy (`session.started`) and then how it
        ended (`session.completed`, or `session.failed` for a failed or fenced attempt)."""
        turn_id = new_id()
        started = {
            "inputs": len(queries),
            "turn_id": turn_id,
            "worker": worker_name(),
            "started_at": self.clock(),
        }
        # `session.started` goes out with the turn's first publish (the model call's
        # `step.started`), one round trip for both.
        # The turn's own events (not the leading ones) are marked as they go and kept by
        # its commit, in the ledger (docs/operations.md, "Session events").
        kept = KeptEvents(session_id, turn_id, skip=len(leading))
        leading_publisher = LeadingPublisher(
            KeepingPublisher(self.publisher, kept),
            [*leading, StreamEvent(session_id, SESSION_STARTED, started)],
        )
        # What the turn's commit reports goes out with how the session ended, one publish,
        # and only then the doorbells the commit rang.
        report = Report(kept=kept)
        try:
            outcome = dataclasses.replace(self, publisher=leading_publisher)._answer(
                session_id,
                queries,
                turn_id=turn_id,
                epoch=epoch,
                consumed=consumed,
                queue_mode=queue_mode,
                report=report,
                source=source,
                read=read,
            )
        except BaseException:
            # Watchers still learn a turn started; the runner reports the rest. A commit
            # made before the failure still rings.
            try:
                leading_publisher.flush()
            finally:
                run_after_commit(report.rings)
            raise
        ended = outcome.status == "committed" and (
            outcome.result is None or outcome.result.status != TurnStatus.FAILED
        )
        report.events.append(
            report.ending
            or StreamEvent(
                session_id,
                SESSION_COMPLETED if ended else SESSION_FAILED,
                {"turn_id": outcome.turn_id, "status": outcome.status},
            )
        )
        report.send(leading_publisher)  # with `session.started` if nothing went out yet
        return outcome

    def _answer(
        self,
        session_id: str,
        queries: Sequence[QueryMessage],
        *,
        turn_id: str,
        epoch: int,
        consumed: Sequence[ConsumedItem],
        queue_mode: QueueMode | None,
        report: Report,
        source: EventRecord | None = None,
        read: SessionSnapshot | None = None,
    ) -> TurnOutcome:
        manual = (
            compaction_policy.manual_compaction_request(queries[0].text)
            if len(queries) == 1
            else None
        )
        if manual is not None:
            outcome = self.compact(
                session_id,
                epoch=epoch,
                trigger=CompactionTrigger.MANUAL,
                instructions=manual.instructions,
                consumed=consumed,
            )
            return TurnOutcome(
                status="fenced" if outcome.status == "fenced" else "committed",
                turn_id=outcome.turn_id or "",
                result=None,
                compactions=(outcome,),
            )
        compactions: list[CompactionOutcome] = []
        snapshot = self.taken(read) if read is not None else self.snapshot(session_id)
        try:
            config = self._config(snapshot, queries)
        except ModelConfigError as error:
            return self._refuse_config(
                snapshot, turn_id, queries, epoch=epoch, reason=str(error), report=report
            )
        assembled = self._assemble(snapshot, queries, config)
        if compaction_policy.should_compact(assembled.tokens, assembled.window):
            done = self._compact_snapshot(
                snapshot,
                epoch=epoch,
                trigger=CompactionTrigger.PROACTIVE,
                target_ratio=compaction_policy.PROACTIVE_TARGET,
            )
            compactions.append(done)
            if done.status == "fenced":
                return TurnOutcome("fenced", "", None, tuple(compactions))
            snapshot = self.snapshot(session_id)
            assembled = self._assemble(snapshot, queries, config)
        started = self.clock()
        effects: list[Effect] = []
        after = AfterTurn()
        # One for the whole turn, the overflow's retry included: the secrets its tools were
        # given are scrubbed from all it stores, its kept stream events too.
        scrubber = Scrubber()
        result = self._machine(snapshot, turn_id, effects, after, config, scrubber).run(
            assembled.request, tuple(queries)
        )
        if result.overflowed and not result.ran_tools:
            # The model says the context is too long after all: compact hard and retry once.
            done = self._compact_snapshot(
                snapshot,
                epoch=epoch,
                trigger=CompactionTrigger.OVERFLOW,
                target_ratio=compaction_policy.OVERFLOW_TARGET,
            )
            compactions.append(done)
            if done.status == "fenced":
                return TurnOutcome("fenced", turn_id, result, tuple(compactions))
            snapshot = self.snapshot(session_id)
            assembled = self._assemble(snapshot, queries, config)
            effects.clear()
            after = AfterTurn()
            result = self._machine(snapshot, turn_id, effects, after, config, scrubber).run(
                assembled.request, tuple(queries)
            )
        status = self._commit(
            snapshot,
            turn_id,
            result,
            started=started,
            epoch=epoch,
            consumed=consumed,
            queue_mode=queue_mode,
            queries=queries,
            effects=effects,
            report=report,
            config=config,
            source=source,
            scrubber=scrubber,
        )
        asked = after.compaction
        if status == "committed" and result.status == TurnStatus.COMPLETED and asked is not None:
            try:
                compactions.append(self._compact_asked(session_id, turn_id, asked, epoch, report))
            except Exception:  # the turn is committed: a failed extra must not undo its report
                log.exception("asked_compaction_failed", session_id=session_id, turn_id=turn_id)
        return TurnOutcome(status, turn_id, result, tuple(compactions))

    def _refuse_config(
        self,
        snapshot: Snapshot,
        turn_id: str,
        queries: Sequence[QueryMessage],
        *,
        epoch: int,
        reason: str,
        report: Report,
    ) -> TurnOutcome:
        """The layers no longer fit together (say, a persona changed under a session's
        override): the attempt is recorded failed with the reason, and no model is called."""
        result = refused_result(queries, reason)
        started = self.clock()
        status = self._commit(
            snapshot,
            turn_id,
            result,
            started=started,
            epoch=epoch,
            consumed=(),
            queue_mode=None,
            queries=queries,
            report=report,
            config=None,
        )
        return TurnOutcome(status, turn_id, result)

    def _compact_asked(
        self,
        session_id: str,
        turn_id: str,
        asked: CompactionAsk,
        epoch: int,
        report: Report,
    ) -> CompactionOutcome:
        """The compaction `compact_context` asked for, now that its turn is on the chain.

        Under the turn's epoch and in the same run, so the session still has one writer and
        a newer run fences it like any commit. Trigger `manual` (a tool or the slash
        command: docs/engine.md, "Compaction"); the turn's own events go out first, so
        watchers see them in order."""
        report.send(self.publisher)
        return self._compact_snapshot(
            self.snapshot(session_id),
            epoch=epoch,
            trigger=CompactionTrigger.MANUAL,
            target_ratio=compaction_policy.PROACTIVE_TARGET,
            instructions=asked.instructions,
            metadata={
                "requested_by": {
                    "tool": "compact_context",
                    "turn_id": turn_id,
                    "tool_call_id": asked.call_id,
                }
            },
        )

    def _machine(
        self,
        snapshot: Snapshot,
        turn_id: str,
        effects: list[Effect],
        after: AfterTurn,
        config: EffectiveConfig,
        scrubber: Scrubber,
    ) -> TurnMachine:
        toolbox, _ = self._toolbox(snapshot, scrubber)
        return TurnMachine(
            model=WithAttachments(
                self.model_for(config.model), self.attachments, files=self.file_counts
            ),
            toolbox=toolbox,
            signals=self.signals,
            publisher=self.publisher,
            clock=self.clock,
            tool_context=ToolContext(
                session_id=snapshot.session.id,
                session_label=snapshot.session.label,
                turn_id=turn_id,
                persona_id=snapshot.persona.id,
                now_ms=self.clock(),
                effects=effects,
                after_turn=after,
            ),
            max_tool_iterations=self.max_tool_iterations,
        )

    def _commit(
        self,
        snapshot: Snapshot,
        turn_id: str,
        result: TurnResult,
        *,
        started: int,
        epoch: int,
        consumed: Sequence[ConsumedItem],
        queue_mode: QueueMode | None,
        queries: Sequence[QueryMessage],
        effects: Sequence[Effect] = (),
        report: Report,
        config: EffectiveConfig | None,
        source: EventRecord | None = None,
        scrubber: Scrubber | None = None,
    ) -> str:
        """Commit (or record) the turn; what a committed one reports, and the doorbells its
        commit rang, are added to `report`, for the caller to send after this commit."""
        failed = result.status == TurnStatus.FAILED
        # Watchers see the commit phase (`running.step` "completing"); posted, so the commit
        # does not wait for the stream. The last model call's held `step.generated` rides
        # with it instead of with the commit's report.
        self.publisher.post_many(
            [
                StreamEvent(
                    snapshot.session.id,
                    TURN_COMPLETING,
                    {"turn_id": turn_id, "status": result.status.value},
                )
            ]
        )
        draft = answer_draft(
            turn_id=turn_id,
            session_id=snapshot.session.id,
            parent_turn_id=snapshot.session.thread_id,
            result=result,
            started=started,
            completed=self.clock(),
            consumed=consumed,
            queue_mode=queue_mode,
            queries=queries,
            config=config,
            prices=self.prices,
        )
        kept: list[StreamEvent] = []
        with self.database.unit_of_work() as uow:
            if failed:
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
                    effect(uow, turn_id)
                # The event the turn answered, if the run read the one the draft names.
                known = (
                    source if source is not None and source.id == draft.source_event_id else None
                )
                for hook in self.commit_hooks:
                    hook(uow, snapshot.session, turn_id, result, known)
                events = reported(draft, outcome, result.status.value)
                kept = keep_turn_events(
                    uow, report, turn_id, events, self.publisher, scrubber=scrubber
                )
            uow.commit(hold=report.rings)
        if outcome.status == "committed":
            if outcome.view is not None:
                self.contexts.advance(snapshot.session.id, outcome.view)
            report.events.extend(kept)
        return outcome.status

    # -- compaction --------------------------------------------------------------------------

    def compact(
        self,
        session_id: str,
        *,
        epoch: int,
        trigger: CompactionTrigger = CompactionTrigger.MANUAL,
        instructions: str | None = None,
        consumed: Sequence[ConsumedItem] = (),
    ) -> CompactionOutcome:
        snapshot = self.snapshot(session_id)
        return self._compact_snapshot(
            snapshot,
            epoch=epoch,
            trigger=trigger,
            instructions=instructions,
            target_ratio=compaction_policy.PROACTIVE_TARGET,
            consumed=consumed,
        )

    def _compact_snapshot(
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
        config = self._plain_config(snapshot)
        sizing = size_compaction(
            context,
            self._assemble(snapshot, (), config),
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
        model_name = self._summary_model_name(config)
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
