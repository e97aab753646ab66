"""What a running turn listens to at every boundary: an abort flag and a steer inbox.

The Session runtime provides a Redis-backed implementation shared across workers; the
in-process twin here serves the embedded mode and tests.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Protocol

from nexus.engine.query import QueryMessage


class TurnSignals(Protocol):
    def abort_requested(self, session_id: str) -> bool:
        """True once someone asked the session's running turn to stop."""
        ...

    def take_steering(self, session_id: str) -> list[QueryMessage]:
        """Messages to inject before the next model call; each is returned exactly once."""
        ...

    def steer_waiting(self, session_id: str) -> bool:
        """True if a `steer` message (one that may extend a finished answer) is waiting."""
        ...


class InProcessSignals:
    """Signals for turns running in this process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborts: set[str] = set()
        self._inbox: defaultdict[str, list[QueryMessage]] = defaultdict(list)

    def request_abort(self, session_id: str) -> None:
        with self._lock:
            self._aborts.add(session_id)

    def clear_abort(self, session_id: str) -> None:
        with self._lock:
            self._aborts.discard(session_id)

    def steer(self, session_id: str, message: QueryMessage) -> None:
        with self._lock:
            self._inbox[session_id].append(message)

    def abort_requested(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._aborts

    def take_steering(self, session_id: str) -> list[QueryMessage]:
        with self._lock:
            return self._inbox.pop(session_id, [])

    def steer_waiting(self, session_id: str) -> bool:
        with self._lock:
            return any(m.extends_answer for m in self._inbox.get(session_id, []))


class NoSignals:
    """Nobody will ever abort or steer (one-off runs, the CLI)."""

    def abort_requested(self, session_id: str) -> bool:
        return False

    def take_steering(self, session_id: str) -> list[QueryMessage]:
        return []

    def steer_waiting(self, session_id: str) -> bool:
        return False
