"""A session's stream events, kept for a while with ids, so an SSE client that reconnects
with `Last-Event-ID` gets what it missed (Redis Streams in production; this twin in-process).

Ids look like Redis stream ids, `{ms}-{seq}`, and order the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

# How much a stream keeps: enough for a reconnect to catch up, bounded so a busy session
# cannot grow it without end (Redis: MAXLEN ~, and an expiry: `stream_expiry`).
STREAM_KEEP = 1_000
START = "0-0"
# What an id may be: `{ms}-{seq}` (or `{ms}`, meaning seq 0), each part an unsigned 64-bit
# number as Redis has them. ASCII digits only: `\d` would take other scripts' digits.
_STREAM_ID = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")
_MAX_PART = 2**64 - 1
# How far ahead of this process's clock an id may be. Ids carry the writer's clock (Redis's,
# or this process's), so a little skew is normal; an id further ahead was never issued, and
# reading after it would show nothing until the clock caught up.
FUTURE_SKEW_MS = 5 * 60_000


class BadStreamId(ValueError):
    """A client's stream id (`Last-Event-ID`) that no stream ever issued."""


@dataclass(frozen=True)
class StreamEntry:
    id: str
    type: str
    data: dict[str, Any]
    at: str = ""  # where the ledger keeps it (nexus.engine.stream_events.Mark), "" if it does not


def parse_stream_id(value: str, *, now_ms: int) -> str:
    """A client's `Last-Event-ID` as a full `{ms}-{seq}` id, or BadStreamId saying why not."""
    match = _STREAM_ID.fullmatch(value)
    if match is None:
        raise BadStreamId(
            f"{value[:64]!r} is not a stream event id (they look like 1700000000000-0)"
        )
    millis, seq = int(match[1]), int(match[2] or 0)
    if millis > _MAX_PART or seq > _MAX_PART:
        raise BadStreamId(f"{value[:64]!r} is out of range for a stream event id")
    if millis > now_ms + FUTURE_SKEW_MS:
        raise BadStreamId(f"{value[:64]!r} is ahead of this server's clock: no event has it yet")
    return f"{millis}-{seq}"


def stream_id_key(stream_id: str) -> tuple[int, int]:
    """Sort key of a well-formed id (the API checks a client's with `parse_stream_id`)."""
    millis, _, seq = stream_id.partition("-")
    return int(millis), int(seq or 0)


@dataclass(eq=False)
class _AsyncWaiter:
    """A coroutine waiting for a session's next entry, woken from whichever thread appends."""

    loop: asyncio.AbstractEventLoop
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed: nobody is waiting any more
            self.loop.call_soon_threadsafe(self.woken.set)


@dataclass
class InProcessStreamLog:
    keep: int = STREAM_KEEP
    _streams: dict[str, deque[StreamEntry]] = field(default_factory=dict)
    _last: tuple[int, int] = (0, 0)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _waiters: dict[str, set[_AsyncWaiter]] = field(default_factory=dict)

    def append(self, session_id: str, event_type: str, data: dict[str, Any], at: str = "") -> str:
        with self._changed:
            millis = int(time.time() * 1000)
            last_ms, last_seq = self._last
            self._last = (millis, 0) if millis > last_ms else (last_ms, last_seq + 1)
            entry = StreamEntry(f"{self._last[0]}-{self._last[1]}", event_type, data, at)
            self._streams.setdefault(session_id, deque(maxlen=self.keep)).append(entry)
            self._changed.notify_all()
            for waiter in self._waiters.pop(session_id, ()):
                waiter.wake()
            return entry.id

    def tail(self, session_id: str) -> str:
        with self._changed:
            stream = self._streams.get(session_id)
            return stream[-1].id if stream else START

    def holds(self, session_id: str, stream_id: str) -> bool:
        """Whether the session's stream still has the entry `stream_id`."""
        with self._changed:
            return any(e.id == stream_id for e in self._streams.get(session_id, ()))

    def drop(self, session_id: str) -> None:
        """Forget the session's stream, as Redis does when its key expires or is deleted."""
        with self._changed:
            self._streams.pop(session_id, None)

    def read(self, session_id: str, after: str, *, block_ms: int) -> list[StreamEntry]:
        """Entries after `after`, waiting up to `block_ms` for the first one."""
        floor = stream_id_key(after)
        deadline = time.monotonic() + block_ms / 1000
        with self._changed:
            while True:
                found = self._after(session_id, floor)
                remaining = deadline - time.monotonic()
                if found or remaining <= 0:
                    return found
                self._changed.wait(remaining)

    async def read_async(self, session_id: str, after: str, *, block_ms: int) -> list[StreamEntry]:
        """`read` for an event loop: the wait holds no thread, only a registered waiter."""
        floor = stream_id_key(after)
        deadline = time.monotonic() + block_ms / 1000
        while True:
            waiter = _AsyncWaiter(asyncio.get_running_loop())
            with self._changed:  # registered under the lock, so no append slips between
                found = self._after(session_id, floor)
                remaining = deadline - time.monotonic()
                if found or remaining <= 0:
                    return found
                self._waiters.setdefault(session_id, set()).add(waiter)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.woken.wait(), remaining)
            finally:
                with self._changed:
                    waiting = self._waiters.get(session_id)
                    if waiting is not None:
                        waiting.discard(waiter)
                        if not waiting:
                            del self._waiters[session_id]

    def _after(self, session_id: str, floor: tuple[int, int]) -> list[StreamEntry]:
        return [e for e in self._streams.get(session_id, ()) if stream_id_key(e.id) > floor]


# An SSE event id: the stream id, then where the client is in the ledger's copy of the
# events (`.{sequence}`: every kept event up to it was sent), then, for an event of a turn
# still running when it was sent, `.{turn_id}.{n}` (its n-th event). Bare stream ids, as
# issued before the ledger kept events, are still read.
_LEDGER_PART = re.compile(r"([0-9]{1,18})(?:\.([0-9A-Za-z]{1,64})\.([0-9]{1,9}))?")


@dataclass(frozen=True)
class ResumeId:
    """Where a reconnecting client was (`Last-Event-ID`, parsed)."""

    stream_id: str
    known: int | None = None  # None: a bare stream id (no ledger position)
    turn_id: str | None = None
    n: int | None = None


def parse_resume_id(value: str, *, now_ms: int) -> ResumeId:
    """A client's `Last-Event-ID` (see above), or BadStreamId saying why not."""
    stream_part, dot, ledger_part = value.partition(".")
    stream_id = parse_stream_id(stream_part, now_ms=now_ms)
    if not dot:
        return ResumeId(stream_id)
    match = _LEDGER_PART.fullmatch(ledger_part)
    if match is None:
        raise BadStreamId(
            f"{value[:64]!r} is not a stream event id (they look like 1700000000000-0.42)"
        )
    n = None if match[3] is None else int(match[3])
    return ResumeId(stream_id, int(match[1]), match[2], n)


def resume_id_text(stream_id: str, known: int, turn_id: str | None = None, n: int = 0) -> str:
    """The SSE id of an event sent after stream entry `stream_id` with every kept event up to
    `known` sent (and, for a running turn's event, which one it is)."""
    if turn_id is None:
        return f"{stream_id}.{known}"
    return f"{stream_id}.{known}.{turn_id}.{n}"
