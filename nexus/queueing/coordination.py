"""The coordination port: a per-session lease, the abort flag, the steer inbox, a stream.

Redis implements it across workers (the Redis coordination adapter); the in-process
twin here serves the embedded mode and unit tests, and one contract suite runs against both.
None of it is durable, and none of it needs to be: the lease only saves duplicate work (the
epoch fence makes commits correct), and every signal's input is also a queue item in the
ledger that a later turn picks up if the signal is lost.

Signals carry the session's epoch as the one who raised them read it (under the session's
row lock, with the input's enqueue): a turn claimed at a later epoch claimed after that input
was queued, so no signal raised before its claim can reach it, however late it first looks
(docs/runtime.md, "Signals are ordered by epoch"). Nothing is cleared for that: an old
signal simply means nothing to a newer turn, and expires.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nexus.engine.query import QueryMessage
from nexus.engine.stream import RecordingPublisher
from nexus.engine.stream_events import StreamEvent
from nexus.queueing.running import RunningTurn, change_for, running_from
from nexus.queueing.stream_log import InProcessStreamLog, StreamEntry


class CoordinationUnavailable(Exception):
    """The coordination store (Redis) did not answer: a caller may retry later."""


@dataclass(frozen=True)
class Steer:
    """A message for a running turn, and the session's epoch when it was raised."""

    epoch: int
    message: QueryMessage


class Lease(Protocol):
    def extend(self) -> bool:
        """Push the expiry out by the lease's TTL; False once it was lost to someone else."""
        ...

    def release(self) -> None:
        """Give it up; harmless if it already expired."""
        ...


class Coordination(Protocol):
    def acquire(self, name: str, ttl_ms: int) -> Lease | None:
        """The lease `name` if nobody holds it, else None (never blocks)."""
        ...

    def lease_held(self, name: str) -> bool:
        """Whether someone holds the lease `name` now (a holder that died holds it until
        its TTL lapses)."""
        ...

    def raise_flag(self, name: str, ttl_ms: int) -> bool:
        """Set the flag `name` for `ttl_ms` unless it is set; True if this call set it."""
        ...

    def lower_flag(self, name: str) -> None: ...

    def request_abort(self, session_id: str, *, epoch: int) -> None:
        """Ask the session's turn claimed at `epoch`, or at an earlier one, to stop. The
        highest epoch asked is kept: a late, lower ask never hides a higher one."""
        ...

    def abort_epoch(self, session_id: str) -> int | None:
        """The highest epoch an abort was asked for; None when none was (or it expired)."""
        ...

    def steer(self, session_id: str, message: QueryMessage, *, epoch: int) -> None:
        """Leave `message` for the session's turn claimed at `epoch` (or a later one)."""
        ...

    def take_steering(self, session_id: str) -> list[Steer]:
        """Every steer left for the session, oldest first; each is returned exactly once."""
        ...

    def steers_waiting(self, session_id: str) -> list[Steer]:
        """The steers left for the session, without taking them."""
        ...

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None: ...

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        """Several events, in order, in one round trip."""
        ...

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        """`publish_many` without waiting for the store's answer: the events are applied, in
        order, before anything this thread asks of the coordination next returns, and
        `settle` waits for them. What a running turn publishes as it goes; an error comes
        out of the call that reads the answer."""
        ...

    def settle(self) -> None:
        """Wait until what this thread posted is applied (raise what it failed with)."""
        ...

    def stream_tail(self, session_id: str) -> str:
        """The id of the session's newest stream event ("0-0" when there is none)."""
        ...

    def running(self, session_id: str) -> RunningTurn | None:
        """The turn the session runs now, kept from its stream events (see
        nexus/queueing/running.py); None when it runs none or its lease has lapsed."""
        ...

    def read_stream(self, session_id: str, after: str, *, block_ms: int) -> list[StreamEntry]:
        """Stream events after `after`, oldest first, waiting up to `block_ms` for one."""
        ...

    # The same two for an event loop (the SSE route): a wait holds no thread, so open
    # streams cost the API a socket each, not a worker thread. Both raise
    # CoordinationUnavailable when the store does not answer.

    async def stream_tail_async(self, session_id: str) -> str: ...

    async def read_stream_async(
        self, session_id: str, after: str, *, block_ms: int
    ) -> list[StreamEntry]: ...

    async def stream_holds_async(self, session_id: str, stream_id: str) -> bool:
        """Whether the session's stream still has the entry `stream_id`: when it does not
        (trimmed, expired, flushed), a reconnect after it reads the ledger's copy."""
        ...


@dataclass
class _Held:
    token: str
    expires_at: float


@dataclass
class InProcessLease:
    owner: InProcessCoordination
    name: str
    token: str
    ttl_s: float

    def extend(self) -> bool:
        return self.owner._extend(self.name, self.token, self.ttl_s)

    def release(self) -> None:
        self.owner._release(self.name, self.token)


@dataclass
class InProcessCoordination:
    """Everything in this process's memory, thread-safe; leases expire like Redis keys."""

    stream: RecordingPublisher = field(default_factory=RecordingPublisher)
    log: InProcessStreamLog = field(default_factory=InProcessStreamLog)
    _held: dict[str, _Held] = field(default_factory=dict)
    _flags: dict[str, float] = field(default_factory=dict)
    _running: dict[str, dict[str, str]] = field(default_factory=dict)
    _aborts: dict[str, int] = field(default_factory=dict)
    _steers: dict[str, list[Steer]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def acquire(self, name: str, ttl_ms: int) -> InProcessLease | None:
        now = time.monotonic()
        with self._lock:
            held = self._held.get(name)
            if held is not None and held.expires_at > now:
                return None
            token = uuid.uuid4().hex
            self._held[name] = _Held(token, now + ttl_ms / 1000)
        return InProcessLease(self, name, token, ttl_ms / 1000)

    def lease_held(self, name: str) -> bool:
        with self._lock:
            held = self._held.get(name)
            return held is not None and held.expires_at > time.monotonic()

    def _extend(self, name: str, token: str, ttl_s: float) -> bool:
        now = time.monotonic()
        with self._lock:
            held = self._held.get(name)
            if held is None or held.token != token or held.expires_at <= now:
                return False
            held.expires_at = now + ttl_s
            return True

    def _release(self, name: str, token: str) -> None:
        with self._lock:
            held = self._held.get(name)
            if held is not None and held.token == token:
                del self._held[name]

    def raise_flag(self, name: str, ttl_ms: int) -> bool:
        now = time.monotonic()
        with self._lock:
            if self._flags.get(name, 0.0) > now:
                return False
            self._flags[name] = now + ttl_ms / 1000
            return True

    def lower_flag(self, name: str) -> None:
        with self._lock:
            self._flags.pop(name, None)

    def request_abort(self, session_id: str, *, epoch: int) -> None:
        with self._lock:
            self._aborts[session_id] = max(epoch, self._aborts.get(session_id, epoch))

    def abort_epoch(self, session_id: str) -> int | None:
        with self._lock:
            return self._aborts.get(session_id)

    def steer(self, session_id: str, message: QueryMessage, *, epoch: int) -> None:
        with self._lock:
            self._steers.setdefault(session_id, []).append(Steer(epoch, message))

    def take_steering(self, session_id: str) -> list[Steer]:
        with self._lock:
            return self._steers.pop(session_id, [])

    def steers_waiting(self, session_id: str) -> list[Steer]:
        with self._lock:
            return list(self._steers.get(session_id, []))

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.publish_many([StreamEvent(session_id, event_type, data)])

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        self.stream.publish_many(events)
        for event in events:
            self.log.append(*event)
            self._follow(event)

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        self.publish_many(events)  # in memory, nothing to wait for

    def settle(self) -> None:
        return None

    def _follow(self, event: StreamEvent) -> None:
        change = change_for(event)
        if change is None:
            return
        with self._lock:
            if change.kind == "end":
                self._running.pop(event.session_id, None)
            elif change.kind == "start":
                self._running[event.session_id] = dict(change.fields)
            else:
                self._running.setdefault(event.session_id, {}).update(change.fields)

    def running(self, session_id: str) -> RunningTurn | None:
        if not self.lease_held(f"session:{session_id}"):
            return None
        with self._lock:
            return running_from(dict(self._running.get(session_id, {})))

    def stream_tail(self, session_id: str) -> str:
        return self.log.tail(session_id)

    def read_stream(self, session_id: str, after: str, *, block_ms: int) -> list[StreamEntry]:
        return self.log.read(session_id, after, block_ms=block_ms)

    async def stream_tail_async(self, session_id: str) -> str:
        return self.log.tail(session_id)

    async def read_stream_async(
        self, session_id: str, after: str, *, block_ms: int
    ) -> list[StreamEntry]:
        return await self.log.read_async(session_id, after, block_ms=block_ms)

    async def stream_holds_async(self, session_id: str, stream_id: str) -> bool:
        return self.log.holds(session_id, stream_id)
