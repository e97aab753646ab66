"""The ledger's tables; their names are part of the public contract (docs/ledger.md)."""

from nexus.ledger.models.agents import Agent, AgentCapability, Capability
from nexus.ledger.models.base import Base, table_of
from nexus.ledger.models.channels import GmailMailbox
from nexus.ledger.models.files import FileSighting, StoredFile
from nexus.ledger.models.identity import Contact, Entity, Event
from nexus.ledger.models.metrics import MetricDelta, MetricTotal
from nexus.ledger.models.operations import Delivery, Hook, HookInvocation, TimerState
from nexus.ledger.models.queue import QueueItem
from nexus.ledger.models.session_events import SessionEvent
from nexus.ledger.models.sessions import (
    LIVE_SESSION,
    Session,
    SessionAlias,
    SessionHistory,
    SessionTask,
)
from nexus.ledger.models.turns import Compaction, Message, Thread, ToolCall, Turn

metadata = Base.metadata

__all__ = [
    "LIVE_SESSION",
    "Agent",
    "AgentCapability",
    "Base",
    "Capability",
    "Compaction",
    "Contact",
    "Delivery",
    "Entity",
    "Event",
    "FileSighting",
    "GmailMailbox",
    "Hook",
    "HookInvocation",
    "Message",
    "MetricDelta",
    "MetricTotal",
    "QueueItem",
    "Session",
    "SessionAlias",
    "SessionEvent",
    "SessionHistory",
    "SessionTask",
    "StoredFile",
    "Thread",
    "TimerState",
    "ToolCall",
    "Turn",
    "metadata",
    "table_of",
]
