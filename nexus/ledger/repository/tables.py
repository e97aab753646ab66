"""The Core tables the repositories' SQL is written against, each under one name."""

from __future__ import annotations

from nexus.ledger.models import (
    Agent,
    AgentCapability,
    Capability,
    Compaction,
    Contact,
    Delivery,
    Entity,
    Event,
    FileSighting,
    GmailMailbox,
    Hook,
    HookInvocation,
    Message,
    MetricDelta,
    MetricTotal,
    QueueItem,
    Session,
    SessionAlias,
    SessionEvent,
    SessionHistory,
    SessionTask,
    StoredFile,
    Thread,
    TimerState,
    ToolCall,
    Turn,
    table_of,
)

agent_capabilities = table_of(AgentCapability)
agents = table_of(Agent)
aliases = table_of(SessionAlias)
capabilities = table_of(Capability)
compactions = table_of(Compaction)
contacts = table_of(Contact)
deliveries = table_of(Delivery)
deltas = table_of(MetricDelta)
entities = table_of(Entity)
events = table_of(Event)
files = table_of(StoredFile)
gmail_mailboxes = table_of(GmailMailbox)
history = table_of(SessionHistory)
hooks = table_of(Hook)
invocations = table_of(HookInvocation)
messages = table_of(Message)
queue_items = table_of(QueueItem)
session_events = table_of(SessionEvent)
sessions = table_of(Session)
sightings = table_of(FileSighting)
tasks = table_of(SessionTask)
threads = table_of(Thread)
timer_state = table_of(TimerState)
tool_calls = table_of(ToolCall)
totals = table_of(MetricTotal)
turns = table_of(Turn)
