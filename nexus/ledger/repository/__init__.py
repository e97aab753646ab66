"""The ledger repository: every SQL statement Nexus runs lives in this package."""

from __future__ import annotations

from sqlalchemy import Connection

from nexus.ids import Clock, now_ms
from nexus.ledger.repository.agents import AgentRepository
from nexus.ledger.repository.deliveries import DeliveryRepository
from nexus.ledger.repository.errors import (
    LabelTaken,
    LedgerConflict,
    LedgerError,
    NotForkable,
    NotFound,
)
from nexus.ledger.repository.events import EventRepository
from nexus.ledger.repository.hooks import HookRepository
from nexus.ledger.repository.identity import IdentityRepository
from nexus.ledger.repository.metrics import MetricsRepository
from nexus.ledger.repository.queue import QueueRepository
from nexus.ledger.repository.search import SearchRepository
from nexus.ledger.repository.sessions import SessionRepository
from nexus.ledger.repository.threads import ThreadRepository
from nexus.ledger.repository.timer import TimerRepository
from nexus.ledger.repository.turns import TurnRepository


class Ledger:
    """The repositories bound to one connection (and so to one transaction)."""

    def __init__(self, connection: Connection, *, clock: Clock = now_ms) -> None:
        self.connection = connection
        self.clock = clock  # the ledger's notion of now, for callers that compare times
        self.agents = AgentRepository(connection, clock)
        self.sessions = SessionRepository(connection, clock)
        self.turns = TurnRepository(connection, clock)
        self.threads = ThreadRepository(connection)
        self.events = EventRepository(connection, clock)
        self.identity = IdentityRepository(connection, clock)
        self.queue = QueueRepository(connection, clock)
        self.search = SearchRepository(connection)
        self.hooks = HookRepository(connection, clock)
        self.timer = TimerRepository(connection, clock)
        self.deliveries = DeliveryRepository(connection, clock)
        self.metrics = MetricsRepository(connection)


__all__ = [
    "LabelTaken",
    "Ledger",
    "LedgerConflict",
    "LedgerError",
    "NotForkable",
    "NotFound",
]
