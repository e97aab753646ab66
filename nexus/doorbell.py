"""The doorbell port: tell workers that durable work exists. Losing a ring loses nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class Doorbell(Protocol):
    """Rung only after commit; the relay re-rings from the database whatever was missed."""

    def event_received(self, event_id: str) -> None: ...

    def hooks_due(self, event_id: str) -> None:
        """An event that needs no routing (a timer minute) is ready for the hooks."""
        ...

    def session_has_work(self, session_id: str) -> None: ...

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        """Ring later: work that is not ready yet (a collect window, a retry backoff)."""
        ...

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        """A reply chunk may be sent (now, or after `delay_ms`: a retry's backoff)."""
        ...

    def mailbox_changed(self, mailbox: str) -> None:
        """A mailbox said it changed (a Gmail push): read its new messages. The timer
        reads them within a minute anyway, so a lost ring only delays them."""
        ...


@dataclass
class RecordingDoorbell:
    """The in-process twin: remembers every ring (tests, and wiring checks)."""

    events: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    later: list[tuple[str, int]] = field(default_factory=list)
    deliveries: list[tuple[str, int]] = field(default_factory=list)
    mailboxes: list[str] = field(default_factory=list)

    def event_received(self, event_id: str) -> None:
        self.events.append(event_id)

    def hooks_due(self, event_id: str) -> None:
        self.hooks.append(event_id)

    def session_has_work(self, session_id: str) -> None:
        self.sessions.append(session_id)

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        self.later.append((session_id, delay_ms))

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        self.deliveries.append((delivery_id, delay_ms))

    def mailbox_changed(self, mailbox: str) -> None:
        self.mailboxes.append(mailbox)


class DeferredDoorbell:
    """Rings nothing now; the relay rings from the database at the next worker start or
    tick. For processes that cannot reach the workers' broker (a CLI beside `nexus dev`)."""

    def event_received(self, event_id: str) -> None:
        return None

    def hooks_due(self, event_id: str) -> None:
        return None

    def session_has_work(self, session_id: str) -> None:
        return None

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        return None

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        return None

    def mailbox_changed(self, mailbox: str) -> None:
        return None


class Flags(Protocol):
    """Short-lived shared flags (the coordination port provides them)."""

    def raise_flag(self, name: str, ttl_ms: int) -> bool: ...


# The router drains every waiting event per run, so one ring per drain is enough; the flag
# is lowered when a drain starts, and any event committed after that rings a new one.
ROUTER_PENDING = "router-pending"
ROUTER_PENDING_TTL_MS = 10_000  # a lost ring costs at most this long before the next rings


class CoalescingDoorbell:
    """Rings the router only when no drain is already pending; everything else as is."""

    def __init__(self, inner: Doorbell, flags: Flags) -> None:
        self._inner = inner
        self._flags = flags

    def event_received(self, event_id: str) -> None:
        if self._flags.raise_flag(ROUTER_PENDING, ROUTER_PENDING_TTL_MS):
            self._inner.event_received(event_id)

    def hooks_due(self, event_id: str) -> None:
        self._inner.hooks_due(event_id)

    def session_has_work(self, session_id: str) -> None:
        self._inner.session_has_work(session_id)

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        self._inner.session_has_work_after(session_id, delay_ms)

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        self._inner.delivery_ready(delivery_id, delay_ms)

    def mailbox_changed(self, mailbox: str) -> None:
        self._inner.mailbox_changed(mailbox)
