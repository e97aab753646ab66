"""The turn service: read the session, assemble its context, run the model loop, commit.

No database transaction is held open across a model call: a turn reads in one unit of work,
talks to the model with none open, and commits in another with compare-and-set on the head
and the epoch, so a slow model never holds a row lock, and a stale run is fenced. What it
compacts, and when, is compaction's (nexus.compaction.service).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nexus.compaction.service import CompactionService
from nexus.db import Database
from nexus.engine.attachments import AttachmentSource, WithAttachments, file_counts
from nexus.engine.capabilities import CapabilityRegistry
from nexus.engine.context_cache import ContextCache
from nexus.engine.credentials import NoSecrets, Scrubber, SecretSource
from nexus.engine.drafts import refused_result
from nexus.engine.model import ModelPort, ModelRequest
from nexus.engine.model_config import DEFAULT_MAX_TOKENS, EffectiveConfig, ModelConfigError
from nexus.engine.outcomes import CommitHook, Snapshot, TurnOutcome
from nexus.engine.prefix_sums import PrefixSums
from nexus.engine.query import QueryMessage
from nexus.engine.reading import SessionReader
from nexus.engine.signals import NoSignals, TurnSignals
from nexus.engine.stream import NullPublisher, Report, StreamPublisher
from nexus.engine.stream_events import StreamEvent
from nexus.engine.tools import AfterTurn, Effect, ToolContext, ToolRegistry
from nexus.engine.turn import TurnMachine
from nexus.engine.workspace import Workspace
from nexus.ids import Clock, new_id, now_ms
from nexus.ledger.enums import QueueMode, TurnStatus
from nexus.ledger.records import ConsumedItem, EventRecord
from nexus.ledger.repository.snapshots import SessionSnapshot
from nexus.pricing import BUILTIN, PriceTable
from nexus.turns.commit import TurnCommit, TurnInputs, TurnRun
from nexus.turns.framing import TurnFrame


@dataclass
class TurnService:
    """Runs a session's turns; its settings are read at each call, so a copy (`replace`)
    or a changed field applies to the next turn."""

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

    def reader(self) -> SessionReader:
        """How this service reads a session and assembles its context."""
        return SessionReader(
            database=self.database,
            contexts=self.contexts,
            tools=self.tools,
            capabilities=self.capabilities,
            secrets=self.secrets,
            default_model=self.default_model,
            max_tokens=self.max_tokens,
            context_window=self.context_window,
            workspace=self.workspace,
        )

    def compaction(self) -> CompactionService:
        """Compaction over the same reads, models, stream and prices as this service's."""
        return CompactionService(
            reader=self.reader(),
            database=self.database,
            model_for=self.model_for,
            publisher=self.publisher,
            clock=self.clock,
            prices=self.prices,
            summary_model=self.summary_model,
        )

    def snapshot(self, session_id: str) -> Snapshot:
        """The session as it is now (see SessionReader.snapshot)."""
        return self.reader().snapshot(session_id)

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

        The stream tells watchers the session is busy, then how it ended (TurnFrame)."""
        turn_id = new_id()
        frame = TurnFrame.open(
            self.publisher,
            session_id,
            turn_id,
            inputs=len(queries),
            leading=leading,
            started_at=self.clock(),
        )
        # Everything the turn publishes, its compactions' included, goes through the frame.
        turn = dataclasses.replace(self, publisher=frame.publisher)
        inputs = TurnInputs(turn_id, tuple(queries), epoch, tuple(consumed), queue_mode, source)
        try:
            outcome = turn.compaction().slash_command(
                session_id, queries, epoch=epoch, consumed=consumed
            )
            if outcome is None:
                reader = turn.reader()
                snapshot = reader.taken(read) if read is not None else reader.snapshot(session_id)
                outcome = turn._answer(snapshot, inputs, frame.report)
        except BaseException:
            frame.abandon()
            raise
        frame.close(outcome)
        return outcome

    def _answer(self, snapshot: Snapshot, inputs: TurnInputs, report: Report) -> TurnOutcome:
        """The turn itself, top to bottom: configure, compact if due, run, retry once
        after an overflow, commit, then any compaction its tools asked for."""
        turn_id, queries, compaction = inputs.turn_id, inputs.queries, self.compaction()
        try:
            config = self.reader().config(snapshot, queries)
        except ModelConfigError as error:
            # The layers no longer fit together (say, a persona changed under a session's
            # override): the attempt is recorded failed with the reason; no model is called.
            refused = TurnRun(refused_result(queries, str(error)), [], AfterTurn())
            unclaimed = dataclasses.replace(inputs, consumed=(), queue_mode=None, source=None)
            status = self._committer().commit(
                snapshot.session, unclaimed, refused, self.clock(), None, report
            )
            return TurnOutcome(status, turn_id, refused.result)
        prepared = compaction.before_turn(snapshot, queries, config, epoch=inputs.epoch)
        compactions = prepared.compactions
        if prepared.assembled is None:
            return TurnOutcome("fenced", "", None, compactions)
        started = self.clock()
        # One for the whole turn, the overflow's retry included: the secrets its tools were
        # given are scrubbed from all it stores, its kept stream events too.
        scrubber = Scrubber()
        ran = self._run(
            prepared.snapshot, prepared.assembled.request, turn_id, config, scrubber, queries
        )
        if ran.result.overflowed and not ran.result.ran_tools:
            prepared = compaction.before_turn(
                prepared.snapshot, queries, config, epoch=inputs.epoch, overflowed=True
            )
            compactions += prepared.compactions
            if prepared.assembled is None:
                return TurnOutcome("fenced", turn_id, ran.result, compactions)
            ran = self._run(
                prepared.snapshot, prepared.assembled.request, turn_id, config, scrubber, queries
            )
        status = self._committer().commit(
            prepared.snapshot.session, inputs, ran, started, config, report, scrubber
        )
        wanted = ran.after.compaction  # by the `compact_context` tool
        if status == "committed" and ran.result.status == TurnStatus.COMPLETED and wanted:
            compactions += compaction.asked(
                snapshot.session.id, turn_id, wanted, epoch=inputs.epoch, report=report
            )
        return TurnOutcome(status, turn_id, ran.result, compactions)

    def _run(
        self,
        snapshot: Snapshot,
        request: ModelRequest,
        turn_id: str,
        config: EffectiveConfig,
        scrubber: Scrubber,
        queries: Sequence[QueryMessage],
    ) -> TurnRun:
        """The model loop (TurnMachine) over `request`, with the session's tools."""
        effects: list[Effect] = []
        after = AfterTurn()
        toolbox, _ = self.reader().toolbox(snapshot, scrubber)
        machine = TurnMachine(
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
        return TurnRun(machine.run(request, tuple(queries)), effects, after)

    def _committer(self) -> TurnCommit:
        """How this service commits (or records) a turn, priced; its report goes to the
        `Report` the caller passes."""
        return TurnCommit(
            self.database, self.publisher, self.contexts, self.commit_hooks, self.prices, self.clock
        )
