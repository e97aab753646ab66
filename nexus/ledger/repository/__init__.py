"""The ledger repository: every SQL statement Nexus runs lives in this package."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar, overload

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

_R = TypeVar("_R")


class _Repository(Generic[_R]):
    """One of the ledger's repositories, built on first use from its connection (and its
    clock, unless `clocked` is False) and kept for the ledger's life, as `cached_property`
    keeps what it builds."""

    @overload
    def __init__(self, build: Callable[[Connection, Clock], _R]) -> None: ...
    @overload
    def __init__(self, build: Callable[[Connection], _R], *, clocked: Literal[False]) -> None: ...
    def __init__(self, build: Callable[..., _R], *, clocked: bool = True) -> None:
        self._build = build
        self._clocked = clocked

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, ledger: None, owner: type[Any]) -> _Repository[_R]: ...
    @overload
    def __get__(self, ledger: Ledger, owner: type[Any]) -> _R: ...
    def __get__(self, ledger: Ledger | None, owner: type[Any]) -> _Repository[_R] | _R:
        if ledger is None:
            return self
        clock = (ledger.clock,) if self._clocked else ()
        built = self._build(ledger.connection, *clock)
        ledger.__dict__[self._name] = built  # found before this descriptor from now on
        return built


class Ledger:
    """The repositories bound to one connection (and so to one transaction).

    Each is built on first use: a unit of work opens a ledger for every task and request,
    and most touch two or three of them.
    """

    def __init__(self, connection: Connection, *, clock: Clock = now_ms) -> None:
        self.connection = connection
        self.clock = clock  # the ledger's notion of now, for callers that compare times

    agents = _Repository(AgentRepository)
    sessions = _Repository(SessionRepository)
    session_events = _Repository(SessionEventRepository)
    turns = _Repository(TurnRepository)
    threads = _Repository(ThreadRepository, clocked=False)
    snapshots = _Repository(SnapshotRepository)
    events = _Repository(EventRepository)
    identity = _Repository(IdentityRepository)
    entities = _Repository(EntityRepository)
    queue = _Repository(QueueRepository)
    search = _Repository(SearchRepository, clocked=False)
    hooks = _Repository(HookRepository)
    timer = _Repository(TimerRepository)
    deliveries = _Repository(DeliveryRepository)
    metrics = _Repository(MetricsRepository, clocked=False)
    usage = _Repository(UsageRepository, clocked=False)
    workers = _Repository(WorkerRepository)
    tasks = _Repository(TaskRepository)
    dead_letters = _Repository(DeadLetterRepository)
    gmail = _Repository(GmailRepository)
    files = _Repository(FileRepository)


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
