"""A session's stream events, kept for a while with ids, so an SSE client that reconnects
with `Last-Event-ID` gets what it missed (Redis Streams in production; this twin in-process).

Ids look like Redis stream ids, `{ms}-{seq}`, and order the same way.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

# How much a stream keeps: enough for a reconnect to catch up, bounded so a busy session
# cannot grow it without end (Redis: MAXLEN ~ and an expiry).
STREAM_KEEP = 1_000
STREAM_TTL_S = 3_600
START = "0-0"


@dataclass(frozen=True)
class StreamEntry:
    id: str
    type: str
    data: dict[str, Any]


def stream_id_key(stream_id: str) -> tuple[int, int]:
    """Sort key of an id; a malformed one sorts first (a client's bad Last-Event-ID
    replays what is kept rather than failing)."""
    millis, _, seq = stream_id.partition("-")
    try:
        return int(millis), int(seq or 0)
    except ValueError:
        return (0, 0)


@dataclass
class InProcessStreamLog:
    keep: int = STREAM_KEEP
    _streams: dict[str, deque[StreamEntry]] = field(default_factory=dict)
    _last: tuple[int, int] = (0, 0)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def append(self, session_id: str, event_type: str, data: dict[str, Any]) -> str:
        with self._changed:
            millis = int(time.time() * 1000)
            last_ms, last_seq = self._last
            self._last = (millis, 0) if millis > last_ms else (last_ms, last_seq + 1)
            entry = StreamEntry(f"{self._last[0]}-{self._last[1]}", event_type, data)
            self._streams.setdefault(session_id, deque(maxlen=self.keep)).append(entry)
            self._changed.notify_all()
            return entry.id

    def tail(self, session_id: str) -> str:
        with self._changed:
            stream = self._streams.get(session_id)
            return stream[-1].id if stream else START

    def read(self, session_id: str, after: str, *, block_ms: int) -> list[StreamEntry]:
        """Entries after `after`, waiting up to `block_ms` for the first one."""
        floor = stream_id_key(after)
        deadline = time.monotonic() + block_ms / 1000
        with self._changed:
            while True:
                found = [
                    entry
                    for entry in self._streams.get(session_id, ())
                    if stream_id_key(entry.id) > floor
                ]
                remaining = deadline - time.monotonic()
                if found or remaining <= 0:
                    return found
                self._changed.wait(remaining)
