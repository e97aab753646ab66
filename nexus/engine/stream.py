"""Where a running turn reports progress: seed 003's event names, to a publisher port."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

STEP_STARTED = "step.started"
STEP_GENERATING = "step.generating"
STEP_GENERATED = "step.generated"
STEP_ERROR = "step.error"
MESSAGE_DELTA = "message.delta"
MESSAGE_CREATED = "message.created"
TOOL_STARTED = "tool.started"
TOOL_COMPLETED = "tool.completed"
SESSION_STARTED = "session.started"
SESSION_COMPLETED = "session.completed"
SESSION_FAILED = "session.failed"
TURN_COMMITTED = "turn.committed"


class StreamPublisher(Protocol):
    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        """Best effort: a lost stream event never changes what the ledger records."""
        ...


class NullPublisher:
    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        return None


@dataclass
class RecordingPublisher:
    """Keeps every event, in order (the in-process twin and the tests' window)."""

    events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        with self._lock:
            self.events.append((session_id, event_type, data))

    def types(self, session_id: str | None = None) -> list[str]:
        return [kind for sid, kind, _ in self.events if session_id in (None, sid)]
