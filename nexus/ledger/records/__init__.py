"""Frozen records that cross the repository boundary; rows never leave it.

One module per part of the ledger; every record is importable from here.
"""

from __future__ import annotations

from nexus.ledger.records.base import Record
from nexus.ledger.records.identity import (
    ContactRecord,
    EntityRecord,
    EventDraft,
    EventRecord,
)
from nexus.ledger.records.operations import (
    DeliveryDraft,
    DeliveryRecord,
    HookRecord,
    MailboxRecord,
)
from nexus.ledger.records.queue import (
    NewQueueItem,
    OpenWork,
    QueueItemRecord,
)
from nexus.ledger.records.sessions import (
    MAX_LABEL_LENGTH,
    AgentRecord,
    NewSession,
    NewTask,
    SessionRecord,
    TaskListing,
    TaskRecord,
)
from nexus.ledger.records.turns import (
    CommitOutcome,
    CompactionDraft,
    CompactionRecord,
    ConsumedItem,
    ContextRead,
    MessageDraft,
    MessageRecord,
    ThreadRecord,
    TokenUsage,
    ToolCallDraft,
    ToolCallRecord,
    TurnDraft,
    TurnRecord,
    TurnView,
)

# The caller-facing string types live beside the columns they are sized by; re-exported
# here, where the records that use them always found them.
from nexus.ledger.strings import NewSessionLabel, SessionLabel, StorableText, check_new_label

__all__ = [
    "MAX_LABEL_LENGTH",
    "AgentRecord",
    "CommitOutcome",
    "CompactionDraft",
    "CompactionRecord",
    "ConsumedItem",
    "ContactRecord",
    "ContextRead",
    "DeliveryDraft",
    "DeliveryRecord",
    "EntityRecord",
    "EventDraft",
    "EventRecord",
    "HookRecord",
    "MailboxRecord",
    "MessageDraft",
    "MessageRecord",
    "NewQueueItem",
    "NewSession",
    "NewSessionLabel",
    "NewTask",
    "OpenWork",
    "QueueItemRecord",
    "Record",
    "SessionLabel",
    "SessionRecord",
    "StorableText",
    "TaskListing",
    "TaskRecord",
    "ThreadRecord",
    "TokenUsage",
    "ToolCallDraft",
    "ToolCallRecord",
    "TurnDraft",
    "TurnRecord",
    "TurnView",
    "check_new_label",
]
