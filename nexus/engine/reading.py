"""What a run reads before it calls a model: the session's snapshot, its model configuration,
its tools, and the context assembled from them. Shared by a turn and a compaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from nexus.db import Database
from nexus.engine.capabilities import CapabilityRegistry
from nexus.engine.context import AssembledContext, assemble
from nexus.engine.context_cache import ContextCache
from nexus.engine.credentials import Scrubber, SecretSource
from nexus.engine.model_config import (
    EffectiveConfig,
    ModelConfigError,
    merge,
    parse,
    persona_layer,
    resolve,
)
from nexus.engine.outcomes import Snapshot
from nexus.engine.permissions import read_permissions
from nexus.engine.query import QueryMessage
from nexus.engine.toolbox import Toolbox
from nexus.engine.tools import ToolRegistry
from nexus.engine.workspace import Workspace
from nexus.ledger.repository.snapshots import SessionSnapshot


@dataclass(frozen=True)
class SessionReader:
    """Reads a session for a run, and builds what the model is sent, without writing."""

    database: Database
    contexts: ContextCache
    tools: ToolRegistry
    capabilities: CapabilityRegistry
    secrets: SecretSource
    default_model: str
    max_tokens: int
    context_window: int | None
    workspace: Workspace | None

    def snapshot(self, session_id: str) -> Snapshot:
        """The session, its persona and capabilities, and its context: one round trip, then
        only the turns this process has not read yet (see ContextCache)."""
        with self.database.reading() as uow:
            read = uow.ledger.snapshots.read(session_id, known=self.contexts.get(session_id))
        return self.taken(read)

    def taken(self, read: SessionSnapshot) -> Snapshot:
        """A snapshot read elsewhere (with the run's claim), kept like one read here: the
        context is remembered for the session's next read."""
        self.contexts.put(read.session.id, read.context)
        context = read.context
        return Snapshot(
            session=read.session,
            persona=read.persona,
            capability_ids=read.capability_ids,
            context=context,
            anchor_depth=context.anchor_depth if context.compaction is not None else None,
        )

    def config(self, snapshot: Snapshot, queries: Sequence[QueryMessage] = ()) -> EffectiveConfig:
        """The model configuration: the queries' own (later over earlier), then the
        session's, the persona's and the deployment's, field by field. Raises
        ModelConfigError when the layers together make one the API would refuse."""
        return resolve(
            turn=merge(*(parse(query.model_overrides) for query in queries)),
            session=parse(snapshot.session.model_overrides),
            persona=persona_layer(snapshot.persona),
            default_model=self.default_model,
            default_max_tokens=self.max_tokens,
        )

    def plain_config(self, snapshot: Snapshot) -> EffectiveConfig:
        """The session's configuration for a summary call, which never thinks: a layer
        that no longer fits the others must not stop a compaction."""
        try:
            config = self.config(snapshot)
        except ModelConfigError:
            config = resolve(default_model=self.default_model, default_max_tokens=self.max_tokens)
        return dataclasses.replace(config, thinking=None)

    def toolbox(
        self, snapshot: Snapshot, scrubber: Scrubber | None = None
    ) -> tuple[Toolbox, tuple[str, ...]]:
        """The session's tools, as its persona may use them, and its capabilities' prompt
        additions."""
        resolved = self.capabilities.resolve(list(snapshot.capability_ids))
        toolbox = Toolbox(
            self.tools,
            read_permissions(snapshot.persona.permissions),
            resolved.tool_names,
            secrets=self.secrets,
            scrubber=scrubber,
        )
        return toolbox, resolved.prompt_additions

    def assemble(
        self,
        snapshot: Snapshot,
        queries: Sequence[QueryMessage],
        config: EffectiveConfig | None = None,
    ) -> AssembledContext:
        """The request the model is sent for `queries`, and what it costs in tokens."""
        config = config or self.config(snapshot, queries)
        toolbox, additions = self.toolbox(snapshot)
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
