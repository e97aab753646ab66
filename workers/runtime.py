"""What a worker process needs, built on first use (after the fork) and never at import."""

from __future__ import annotations

from functools import cached_property

from celery import Celery

from nexus.access.policy import Policy, load_policies
from nexus.db import Database
from nexus.settings import Settings
from workers.doorbell import CeleryDoorbell


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

    def after_fork(self) -> None:
        """A child must not share its parent's database sockets."""
        if "database" in self.__dict__:
            self.database.dispose()
            del self.__dict__["database"]
