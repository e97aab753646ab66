"""The doorbell port: tell workers that durable work exists. Losing a ring loses nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class Doorbell(Protocol):
    """Rung only after commit; the relay re-rings from the database whatever was missed."""

    def event_received(self, event_id: str) -> None: ...

    def session_has_work(self, session_id: str) -> None: ...

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        """Ring later: work that is not ready yet (a collect window, a retry backoff)."""
        ...

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        """A reply chunk may be sent (now, or after `delay_ms`: a retry's backoff)."""
        ...


@dataclass
class RecordingDoorbell:
    """The in-process twin: remembers every ring (tests, and wiring checks)."""

    events: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    later: list[tuple[str, int]] = field(default_factory=list)
    deliveries: list[tuple[str, int]] = field(default_factory=list)

    def event_received(self, event_id: str) -> None:
        self.events.append(event_id)

    def session_has_work(self, session_id: str) -> None:
        self.sessions.append(session_id)

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        self.later.append((session_id, delay_ms))

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        self.deliveries.append((delivery_id, delay_ms))


class DeferredDoorbell:
    """Rings nothing now; the relay rings from the database at the next worker start or
    tick. For processes that cannot reach the workers' broker (a CLI beside `nexus dev`)."""

    def event_received(self, event_id: str) -> None:
        return None

    def session_has_work(self, session_id: str) -> None:
        return None

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        return None

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        return None
