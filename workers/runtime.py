"""What a worker process needs, built on first use (after the fork) and never at import."""

from __future__ import annotations

from functools import cached_property

import structlog
from celery import Celery

from nexus.access.policy import Policy, load_policies
from nexus.db import Database
from nexus.engine.factory import ModelCatalog, build_engine
from nexus.hooks.loader import load_hooks
from nexus.hooks.service import HookRunner
from nexus.ingest.router import QueuePolicy
from nexus.outbound.ports import RateLimiter
from nexus.outbound.rate_limit import InProcessRateLimiter
from nexus.outbound.retry import RetryPolicy
from nexus.outbound.service import DeliveryService
from nexus.queueing.coordination import Coordination, coordination_for
from nexus.queueing.runner import SessionRunner
from nexus.settings import Settings
from workers.doorbell import CeleryDoorbell

log = structlog.get_logger(__name__)


class WorkerRuntime:
    def __init__(self, app: Celery, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    @cached_property
    def database(self) -> Database:
        return Database(
            self.settings.database_url,
            pool_size=self.settings.db_pool_size,
            max_overflow=self.settings.db_max_overflow,
        )

    @cached_property
    def policies(self) -> list[Policy]:
        return load_policies(self.settings.policies)

    @cached_property
    def doorbell(self) -> CeleryDoorbell:
        return CeleryDoorbell(self.app)

    @cached_property
    def coordination(self) -> Coordination:
        # Embedded: in-process, and `nexus dev` hands this same object to its API.
        return coordination_for(self.settings)

    @cached_property
    def queueing(self) -> QueuePolicy:
        return QueuePolicy(cap=self.settings.queue_cap, drop=self.settings.queue_drop_policy)

    @cached_property
    def session_runner(self) -> SessionRunner:
        engine = build_engine(
            self.settings, self.database, publisher=self.coordination, doorbell=self.doorbell
        )
        return SessionRunner(
            database=self.database,
            engine=engine,
            coordination=self.coordination,
            doorbell=self.doorbell,
            lease_ttl_ms=self.settings.session_lease_ms,
            turn_time_limit_ms=self.settings.turn_time_limit_seconds * 1000,
            collect_window_ms=self.settings.collect_window_ms,
        )

    @cached_property
    def hook_runner(self) -> HookRunner:
        report = load_hooks(self.settings.hooks_dir)
        for problem in report.problems:
            log.warning("hook_not_loaded", problem=problem)
        catalog = ModelCatalog(self.settings)
        model = self.settings.default_model
        runner = HookRunner(
            database=self.database,
            hooks=report.hooks,
            doorbell=self.doorbell,
            llm_port=lambda: catalog(model),
            llm_model=model,
        )
        runner.sync()
        return runner

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        if self.settings.redis_url is None:
            return InProcessRateLimiter()
        from nexus.adapters.redis_rate_limit import RedisRateLimiter

        prefix = self.settings.broker_prefix or "nexus:"
        return RedisRateLimiter.from_url(self.settings.redis_url, prefix=prefix)

    @cached_property
    def delivery_service(self) -> DeliveryService:
        from nexus.adapters.outbound.registry import build_senders

        return DeliveryService(
            database=self.database,
            senders=build_senders(self.settings),
            limiter=self.rate_limiter,
            doorbell=self.doorbell,
            policy=RetryPolicy(max_attempts=self.settings.delivery_max_attempts),
            lease_ms=self.settings.delivery_lease_ms,
            uncertain=self.settings.delivery_uncertain,
            rates=self.settings.delivery_rate_limits,
        )

    def after_fork(self) -> None:
        """A child must not share its parent's database sockets."""
        if "database" in self.__dict__:
            self.database.dispose()
            del self.__dict__["database"]
        # Everything built on the database (or on sockets) is rebuilt in the child.
        built_on_sockets = (
            "session_runner",
            "coordination",
            "hook_runner",
            "rate_limiter",
            "delivery_service",
        )
        for built in built_on_sockets:
            self.__dict__.pop(built, None)
