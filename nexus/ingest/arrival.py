"""How an event enters a session's queue: the deployment's queue defaults, and the settings a
message arrives under (the session's own, then its policy's, then the defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.access.policy import Decision
from nexus.ledger.enums import MessageSource, QueueMode, TaskStatus
from nexus.ledger.records import EventRecord, SessionRecord
from nexus.queueing.caps import DEFAULT_CAP, DropPolicy
from nexus.queueing.modes import DEFAULT_COLLECT_WINDOW_MS
from nexus.queueing.settings import EffectiveQueue, QueueDefaults, QueueOverrides, effective_queue

# DESIGN §5: a person's message preempts a stale answer; automation waits its turn.
_DEFAULT_MODES = {
    MessageSource.HUMAN: QueueMode.INTERRUPT,
    MessageSource.AGENT: QueueMode.FOLLOWUP,
    MessageSource.CRON: QueueMode.FOLLOWUP,
    MessageSource.TRIGGER: QueueMode.FOLLOWUP,
    MessageSource.WEBHOOK: QueueMode.FOLLOWUP,
}


def archived_reason(session: SessionRecord) -> str:
    """Why a message for an archived session is refused (its one disposition)."""
    if session.task_status == TaskStatus.CANCELLED:  # cancelling a worker archives it
        return f"worker {session.label!r} was cancelled: it takes no new work"
    return f"session {session.label!r} is archived (unarchive it to take messages again)"


def default_queue_mode(source: MessageSource | None) -> QueueMode:
    return _DEFAULT_MODES.get(source, QueueMode.QUEUE) if source else QueueMode.QUEUE


@dataclass(frozen=True)
class QueuePolicy:
    """The deployment's queue defaults (NEXUS_QUEUE_CAP, NEXUS_QUEUE_DROP_POLICY,
    NEXUS_COLLECT_WINDOW_MS): what a session and its policy leave unset."""

    cap: int = DEFAULT_CAP
    drop: DropPolicy = "summarize"
    debounce_ms: int = DEFAULT_COLLECT_WINDOW_MS

    @property
    def defaults(self) -> QueueDefaults:
        return QueueDefaults(cap=self.cap, drop=self.drop, debounce_ms=self.debounce_ms)


def session_overrides(session: SessionRecord) -> QueueOverrides:
    return QueueOverrides(
        mode=session.queue_mode,
        cap=session.queue_cap,
        drop=session.drop_policy,
        debounce_ms=session.debounce_ms,
    )


def policy_overrides(decision: Decision) -> QueueOverrides:
    return QueueOverrides(
        mode=decision.queue_mode,
        cap=decision.queue_cap,
        drop=decision.drop_policy,
        debounce_ms=decision.debounce_ms,
    )


@dataclass(frozen=True)
class Arrival:
    """An event on its way into a session's queue, with the settings it arrived under."""

    event: EventRecord
    mode: QueueMode
    settings: EffectiveQueue


def arrival(
    session: SessionRecord, decision: Decision, event: EventRecord, queueing: QueuePolicy
) -> Arrival:
    """Precedence (each setting): the session's own, then the policy's, then the defaults;
    a mode nobody chose is the message source's (DESIGN §5)."""
    settings = effective_queue(
        session_overrides(session), policy_overrides(decision), queueing.defaults
    )
    return Arrival(event, settings.mode.value or default_queue_mode(event.source), settings)


# The defaults as shipped, for callers (tests, tools) that bring no settings of their own.
SHIPPED_QUEUE_POLICY = QueuePolicy()
