"""What a session run claims, what a router claims for it inline, and what a run reports."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.engine.stream_events import StreamEvent
from nexus.ledger.records import EventRecord
from nexus.ledger.repository.snapshots import SessionSnapshot
from nexus.queueing.coordination import Lease
from nexus.queueing.modes import Run


@dataclass(frozen=True)
class Claim:
    """A claim made: what runs, under which epoch, the inputs' events, the overflow summary
    owed, and whether more was waiting beside it."""

    plan: Run
    epoch: int
    events: dict[str, EventRecord | None]
    overflow: str | None
    more: bool
    # The session as the claim left it, read in the claim's statement (None: read it).
    read: SessionSnapshot | None = None


@dataclass(frozen=True)
class InlineClaim:
    """A session's first claim made inside the router's transaction, under a lease the
    coming run holds: routing and claiming commit together (`SessionRunner.claim_inline`)."""

    session_id: str
    lease: Lease
    claim: Claim
    # What the router announces on the session's stream for the work it queued (say,
    # `queue.item.queued`): sent with the run's first publish, a round trip saved.
    announce: tuple[StreamEvent, ...] = ()


@dataclass(frozen=True)
class RunReport:
    status: str  # busy | done | waiting | fenced
    turns: int = 0
    failed: int = 0
    dead_lettered: int = 0
