"""One process's object graph (`Nexus`): every part, built on first use from the Settings."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property, partial
from typing import TYPE_CHECKING

import structlog

from nexus.access.policy import Policy, load_policies
from nexus.adapters.inbound.base import InboundAdapter
from nexus.adapters.models import ModelCatalog
from nexus.arrival.settings import QueuePolicy
from nexus.bootstrap.adapters import (
    coordination_for,
    doorbell_for,
    gmail_for,
    own_addresses_for,
    platform_files_for,
    rate_limiter_for,
)
from nexus.db import Database
from nexus.doorbell import Doorbell
from nexus.engine.addresses import OwnAddress
from nexus.engine.builtin_tools import builtin_registry
from nexus.engine.capabilities import CapabilityRegistry
from nexus.engine.context_cache import ContextCache
from nexus.engine.signals import NoSignals
from nexus.engine.workspace import Workspace, default_directory
from nexus.hooks.evaluator import Invocation
from nexus.hooks.pool import HookPool
from nexus.hooks.service import HookRunner
from nexus.ids import Clock, now_ms
from nexus.ingest.batch import ProcessedEvent
from nexus.ingest.drain import EventRouter
from nexus.operations.status import WorkerPing
from nexus.outbound.inline import InlineReplies
from nexus.outbound.ports import RateLimiter, Sender
from nexus.outbound.service import DeliveryService
from nexus.outbound.typing import TypingIndicator
from nexus.pricing import PriceTable, load_prices
from nexus.queueing.coordination import Coordination
from nexus.sessions.runner import SessionRunner
from nexus.settings import Settings
from nexus.turns.service import TurnService

if TYPE_CHECKING:
    from celery import Celery

    from nexus.adapters.files_folder import FolderFiles
    from nexus.adapters.gmail_api import GmailApi
    from nexus.adapters.platform_files import PlatformFiles
    from nexus.operations.security import SecurityEvents

log = structlog.get_logger(__name__)


class Nexus:
    """One process's object graph. Parts are built on first use, so each entry point builds
    only what it touches (the API never builds a session runner), and nothing at import.

    The keyword arguments replace a part outright: tests pass an in-memory twin, and
    `nexus dev` passes its worker's own coordination to its API.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        consumes_broker: bool = False,
        database: Database | None = None,
        doorbell: Doorbell | None = None,
        coordination: Coordination | None = None,
        models: ModelCatalog | None = None,
        senders: dict[str, Sender] | None = None,
        celery: Celery | None = None,
        worker_ping: WorkerPing | None = None,
        clock: Clock = now_ms,
    ) -> None:
        self.settings = settings
        self._given_worker_ping = worker_ping
        self.clock = clock
        # A process that runs a worker on the broker (a Celery worker, `nexus dev`) can ring
        # through it even when it is `memory://`; any other process with an in-process broker
        # rings nothing and leaves the relay to ring from the ledger.
        self.consumes_broker = consumes_broker
        self.database = database or Database(
            settings.database_url,
            clock=clock,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            timeout_s=settings.database_timeout_seconds or None,
        )
        self._celery = celery
        self._given_doorbell = doorbell
        self._given_coordination = coordination
        self.models = models or ModelCatalog(settings)
        self._senders = senders

    # --- the broker and what rings through it -------------------------------------------

    @property
    def celery(self) -> Celery:
        """The Celery app of this graph (workers run it; everyone else publishes on it)."""
        if self._celery is None:
            from nexus.adapters.celery_broker import create_celery

            self._celery = create_celery(self.settings)
        return self._celery

    @cached_property
    def worker_ping(self) -> WorkerPing:
        """Which workers answer on the broker now (`nexus status`, through the API)."""
        if self._given_worker_ping is not None:
            return self._given_worker_ping
        from nexus.adapters.celery_broker import ping_workers

        return partial(ping_workers, self.celery)

    @cached_property
    def doorbell(self) -> Doorbell:
        if self._given_doorbell is not None:
            return self._given_doorbell
        return doorbell_for(
            self.settings,
            consumes_broker=self.consumes_broker,
            celery=lambda: self.celery,
            coordination=lambda: self.coordination,
        )

    @cached_property
    def coordination(self) -> Coordination:
        """The lease, the abort flag, the steer inbox and the live stream."""
        if self._given_coordination is not None:
            return self._given_coordination
        return coordination_for(self.settings)

    # --- routing ---------------------------------------------------------------------------

    @cached_property
    def policies(self) -> list[Policy]:
        return load_policies(self.settings.policies)

    @cached_property
    def queue_policy(self) -> QueuePolicy:
        return QueuePolicy(
            cap=self.settings.queue_cap,
            drop=self.settings.queue_drop_policy,
            debounce_ms=self.settings.collect_window_ms,
        )

    @cached_property
    def inbound_adapters(self) -> dict[str, InboundAdapter]:
        from nexus.adapters.inbound.registry import build_adapters

        return build_adapters(self.settings)

    @cached_property
    def router(self) -> EventRouter:
        """The router run: waiting events in batches, then their sessions rung or run."""
        return EventRouter(
            database=self.database,
            policies=self.policies,
            doorbell=self.doorbell,
            signals=self.coordination,
            queueing=self.queue_policy,
            after_routing=self._hooks_after_routing,
            runs=self.session_runner if self.settings.inline_session_runs else None,
        )

    def _hooks_after_routing(self, routed: ProcessedEvent) -> None:
        self.run_hooks(routed.event_id)

    def run_hooks(self, event_id: str) -> list[Invocation]:
        """Every loaded hook on one event, each isolated, after the event is committed."""
        invocations = self.hook_runner.run(event_id)
        if invocations:
            log.info(
                "hooks_evaluated",
                event_id=event_id,
                hooks=len(invocations),
                fired=sum(i.fired for i in invocations),
            )
        return invocations

    # --- turns -----------------------------------------------------------------------------

    @cached_property
    def capabilities(self) -> CapabilityRegistry:
        return CapabilityRegistry()

    @cached_property
    def turns(self) -> TurnService:
        """The agent loop, for the session runner (the one writer of turns)."""
        from nexus.adapters.http_tool import http_fetch_tool
        from nexus.adapters.python_tool import RUN_PYTHON
        from nexus.adapters.secrets import EnvironmentSecrets
        from nexus.agents.people_tools import PeopleTools
        from nexus.agents.results import worker_result_hook
        from nexus.agents.tools import AgentTools
        from nexus.outbound.planning import reply_hook

        tools = builtin_registry()
        agent_tools = AgentTools(
            self.database,
            self.doorbell,
            max_depth=self.settings.max_worker_depth,
        )
        fetch = http_fetch_tool(own=self.own_addresses, count=self.security_events.count)
        people_tools = PeopleTools(
            self.database,
            self.doorbell,
            arrivals=self.coordination,
            queueing=self.queue_policy,
        )
        for tool in (*agent_tools.tools(), *people_tools.tools(), fetch, RUN_PYTHON):
            tools.register(tool)
        return TurnService(
            database=self.database,
            model_for=self.models,
            default_model=self.settings.default_model,
            summary_model=self.settings.summary_model,
            tools=tools,
            # In the turn's own transaction: a worker's result for its manager, and a reply's
            # deliveries for the platform it answers.
            commit_hooks=(
                worker_result_hook(self.doorbell),
                reply_hook(self.doorbell, self.inline_replies),
            ),
            capabilities=self.capabilities,
            signals=NoSignals(),
            publisher=self.coordination,
            max_tool_iterations=self.settings.max_tool_iterations,
            context_window=self.settings.context_window,
            secrets=EnvironmentSecrets(self.settings.secrets_file),
            clock=self.clock,
            contexts=ContextCache(
                self.settings.context_cache_sessions, turns=self.settings.context_cache_turns
            ),
            prices=self.prices,
            workspace=Workspace(default_directory(self.settings.workspace_dir)),
            attachments=self.platform_files,
        )

    @cached_property
    def own_addresses(self) -> tuple[OwnAddress, ...]:
        """Where tools never connect: NEXUS_OWN_ADDRESSES, and the API's own URLs."""
        return own_addresses_for(self.settings)

    @cached_property
    def security_events(self) -> SecurityEvents:
        """Where tools count what they refused, for the API's /metrics."""
        from nexus.operations.security import SecurityEvents

        return SecurityEvents(self.database)

    @cached_property
    def platform_files(self) -> PlatformFiles:
        """Where the engine fetches inbound files that need a platform's token to open."""
        return platform_files_for(self.settings, self.database)

    @cached_property
    def files_folder(self) -> FolderFiles | None:
        """The watched folder of the files channel (NEXUS_FILES_DIR), or None when unset."""
        if not self.settings.files_dir:
            return None
        from nexus.adapters.files_folder import FolderFiles

        return FolderFiles(self.settings.files_dir)

    @cached_property
    def prices(self) -> PriceTable:
        """The built-in prices, with NEXUS_PRICES merged over them."""
        return load_prices(self.settings.prices)

    @cached_property
    def session_runner(self) -> SessionRunner:
        return SessionRunner(
            database=self.database,
            turns=self.turns,
            coordination=self.coordination,
            doorbell=self.doorbell,
            clock=self.clock,
            lease_ttl_ms=self.settings.session_lease_ms,
            turn_time_limit_ms=self.settings.turn_time_limit_seconds * 1000,
            collect_window_ms=self.settings.collect_window_ms,
            typing=self.typing_indicator,
            replies=self.inline_replies,
        )

    @cached_property
    def typing_indicator(self) -> TypingIndicator:
        """Shows a running turn's typing indicator where its sender has one (iMessage)."""
        return TypingIndicator(lambda: self.senders)

    @cached_property
    def hook_runner(self) -> HookRunner:
        """The hooks in NEXUS_HOOKS_DIR on this machine. It runs those the shared registry
        has enabled, and never rewrites the registry: `nexus hooks sync` does that."""
        runner = self.fresh_hook_runner(
            on_problem=lambda problem: log.warning("hook_not_loaded", problem=problem)
        )
        unregistered = runner.unregistered()
        if unregistered:
            log.warning(
                "hooks_not_registered",
                hooks=unregistered,
                hint="new or changed hook files: run `nexus hooks sync` to register them",
            )
        return runner

    def fresh_hook_runner(self, *, on_problem: Callable[[str], object]) -> HookRunner:
        """The hooks as loaded from NEXUS_HOOKS_DIR now, each file problem reported."""
        from nexus.hooks.loader import load_hooks

        report = load_hooks(self.settings.hooks_dir)
        for problem in report.problems:
            on_problem(problem)
        model = self.settings.default_model
        return HookRunner(
            database=self.database,
            hooks=report.hooks,
            doorbell=self.doorbell,
            llm_port=lambda: self.models(model),
            llm_model=model,
            clock=self.clock,
            pool=self.hook_pool,
            queueing=self.queue_policy,
            signals=self.coordination,
        )

    @cached_property
    def hook_pool(self) -> HookPool:
        """The processes hooks run in: none start until a hook is called, in the process
        that calls it (a Celery prefork child, not its parent)."""
        return HookPool(
            size=self.settings.hooks_processes,
            memory_mb=self.settings.hooks_memory_mb,
            env_names=self.settings.hooks_env,
        )

    # --- outbound --------------------------------------------------------------------------

    @cached_property
    def senders(self) -> dict[str, Sender]:
        if self._senders is not None:
            return self._senders
        from nexus.adapters.outbound.registry import build_senders

        return build_senders(self.settings, gmail=self.gmail, own=self.own_addresses)

    @cached_property
    def gmail(self) -> GmailApi | None:
        """The Gmail mailbox (NEXUS_GMAIL_*), or None when the channel is off."""
        return gmail_for(self.settings, self.clock)

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        return rate_limiter_for(self.settings)

    @cached_property
    def delivery_service(self) -> DeliveryService:
        from nexus.outbound.retry import RetryPolicy

        return DeliveryService(
            database=self.database,
            senders=self.senders,
            limiter=self.rate_limiter,
            doorbell=self.doorbell,
            policy=RetryPolicy(max_attempts=self.settings.delivery_max_attempts),
            lease_ms=self.settings.delivery_lease_ms,
            uncertain=self.settings.delivery_uncertain,
            rates=self.settings.delivery_rate_limits,
        )

    @cached_property
    def inline_replies(self) -> InlineReplies:
        """A committed turn's reply, sent by the session run that committed it (the reply
        hook hands it over; the delivery task rung at commit is the backup)."""
        return InlineReplies(self.delivery_service)

    def close(self) -> None:
        """Drop the pooled connections (a forked child must not reuse its parent's), and stop
        this process's hook processes (the next hook call starts new ones)."""
        self.database.dispose()
        if "hook_pool" in self.__dict__:
            self.hook_pool.close()
        if "platform_files" in self.__dict__:
            self.platform_files.close()
        gmail = self.__dict__.get("gmail")
        if gmail is not None:
            gmail.close()
