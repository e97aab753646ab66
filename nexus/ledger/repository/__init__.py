"""The ledger repository: every SQL statement Nexus runs lives in this package."""

from __future__ import annotations

from functools import cached_property

from sqlalchemy import Connection

from nexus.ids import Clock, now_ms
from nexus.ledger.repository.agents import AgentRepository
from nexus.ledger.repository.dead_letters import DeadLetterRepository
from nexus.ledger.repository.deliveries import DeliveryRepository
from nexus.ledger.repository.entities import EntityRepository
from nexus.ledger.repository.errors import (
    LabelTaken,
    LedgerConflict,
    LedgerError,
    NotForkable,
    NotFound,
    SessionArchived,
    SessionDeleted,
)
from nexus.ledger.repository.events import EventRepository
from nexus.ledger.repository.files import FileRepository
from nexus.ledger.repository.gmail import GmailRepository
from nexus.ledger.repository.hooks import HookRepository
from nexus.ledger.repository.identity import IdentityRepository
from nexus.ledger.repository.metrics import MetricsRepository
from nexus.ledger.repository.queue import QueueRepository
from nexus.ledger.repository.search import SearchRepository
from nexus.ledger.repository.session_events import SessionEventRepository
from nexus.ledger.repository.sessions import SessionRepository
from nexus.ledger.repository.snapshots import SnapshotRepository
from nexus.ledger.repository.tasks import TaskRepository
from nexus.ledger.repository.threads import ThreadRepository
from nexus.ledger.repository.timer import TimerRepository
from nexus.ledger.repository.turns import TurnRepository
from nexus.ledger.repository.usage import UsageRepository
from nexus.ledger.repository.workers import WorkerRepository


class Ledger:
    """The repositories bound to one connection (and so to one transaction).

    Each is built on first use: a unit of work opens a ledger for every task and request,
    and most touch two or three of them.
    """

    def __init__(self, connection: Connection, *, clock: Clock = now_ms) -> None:
        self.connection = connection
        self.clock = clock  # the ledger's notion of now, for callers that compare times

    @cached_property
    def agents(self) -> AgentRepository:
        return AgentRepository(self.connection, self.clock)

    @cached_property
    def sessions(self) -> SessionRepository:
        return SessionRepository(self.connection, self.clock)

    @cached_property
    def session_events(self) -> SessionEventRepository:
        return SessionEventRepository(self.connection, self.clock)

    @cached_property
    def turns(self) -> TurnRepository:
        return TurnRepository(self.connection, self.clock)

    @cached_property
    def threads(self) -> ThreadRepository:
        return ThreadRepository(self.connection)

    @cached_property
    def snapshots(self) -> SnapshotRepository:
        return SnapshotRepository(self.connection, self.clock)

    @cached_property
    def events(self) -> EventRepository:
        return EventRepository(self.connection, self.clock)

    @cached_property
    def identity(self) -> IdentityRepository:
        return IdentityRepository(self.connection, self.clock)

    @cached_property
    def entities(self) -> EntityRepository:
        return EntityRepository(self.connection, self.clock)

    @cached_property
    def queue(self) -> QueueRepository:
        return QueueRepository(self.connection, self.clock)

    @cached_property
    def search(self) -> SearchRepository:
        return SearchRepository(self.connection)

    @cached_property
    def hooks(self) -> HookRepository:
        return HookRepository(self.connection, self.clock)

    @cached_property
    def timer(self) -> TimerRepository:
        return TimerRepository(self.connection, self.clock)

    @cached_property
    def deliveries(self) -> DeliveryRepository:
        return DeliveryRepository(self.connection, self.clock)

    @cached_property
    def metrics(self) -> MetricsRepository:
        return MetricsRepository(self.connection)

    @cached_property
    def usage(self) -> UsageRepository:
        return UsageRepository(self.connection)

    @cached_property
    def workers(self) -> WorkerRepository:
        return WorkerRepository(self.connection, self.clock)

    @cached_property
    def tasks(self) -> TaskRepository:
        return TaskRepository(self.connection, self.clock)

    @cached_property
    def dead_letters(self) -> DeadLetterRepository:
        return DeadLetterRepository(self.connection, self.clock)

    @cached_property
    def gmail(self) -> GmailRepository:
        return GmailRepository(self.connection, self.clock)

    @cached_property
    def files(self) -> FileRepository:
        return FileRepository(self.connection, self.clock)


__all__ = [
    "LabelTaken",
    "Ledger",
    "LedgerConflict",
    "LedgerError",
    "NotForkable",
    "NotFound",
    "SessionArchived",
    "SessionDeleted",
]
