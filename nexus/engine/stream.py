"""Where a running turn reports progress: the stream's events (docs/engine.md), to a port."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from nexus.db.unit_of_work import run_after_commit
from nexus.engine.stream_events import (
    MESSAGE_CREATED,
    QUEUE_ITEM_CONSUMED,
    TURN_COMMITTED,
    Mark,
    StreamEvent,
)

log = structlog.get_logger(__name__)


def worker_name() -> str:
    """Which process runs a turn, as `host:pid` (what `session.started` says)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class StreamPublisher(Protocol):
    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        """Best effort: a lost stream event never changes what the ledger records."""
        ...

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        """Several events, in order, at the cost of one (one Redis round trip): what a
        commit reports, or a coalesced delta with the progress beside it."""
        ...

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        """`publish_many` without waiting for the answer (Coordination.post_many): what a
        running turn reports as it goes. The turn's report is published, not posted."""
        ...


class LeadingPublisher:
    """Holds events that lead (a turn's `session.started`) and sends them first in the same
    call as the next publish, a round trip saved: the model call's `step.started` follows a
    millisecond or two later, and nothing is published in between. A model call's end
    (`step.generated`) is held the same way (`hold`), for the publish that follows it at
    once: the next model call's start, a tool's, or the turn's commit."""

    def __init__(self, inner: StreamPublisher, leading: Sequence[StreamEvent]) -> None:
        self._inner = inner
        self._held = list(leading)

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.publish_many([StreamEvent(session_id, event_type, data)])

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        held, self._held = self._held, []
        self._inner.publish_many([*held, *events])

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        held, self._held = self._held, []
        self._inner.post_many([*held, *events])

    def hold(self, events: Sequence[StreamEvent]) -> None:
        """Send `events` first with the next publish (or the flush), not now."""
        self._held.extend(events)

    def keep_held(self, kept: KeptEvents) -> None:
        """Mark and keep what is held now as the turn's (its commit is about to keep the
        turn's events; these go out after it, with its report)."""
        self._held = kept.mark(self._held)

    def flush(self) -> None:
        """Send what is still held (nothing else was published)."""
        if self._held:
            self.publish_many(())


@dataclass
class Report:
    """What a turn's commit tells the world once it is durable, in this order: its events on
    the session's stream (one publish, with how the run ended), then the doorbells the
    commit rang (a reply's delivery, a dispatched worker's session). The publish is one
    Redis round trip and a broker's ring a few, so watchers do not wait behind the rings,
    and a delivery waits one round trip."""

    events: list[StreamEvent] = field(default_factory=list)
    rings: list[Callable[[], None]] = field(default_factory=list)
    # The turn's events so far, which its commit keeps in the ledger (none: nothing kept).
    kept: KeptEvents | None = None
    # How the run ended, when the commit decided it and kept it (`session.completed`).
    ending: StreamEvent | None = None

    def send(self, publisher: StreamPublisher) -> None:
        """Publish the events, then ring (each ring whatever the publish or the others do)."""
        events, self.events = self.events, []
        try:
            publisher.publish_many(events)
        except Exception:
            # The turn is committed and the stream is best effort: a watcher that missed the
            # report reads the ledger; the turn is not a crash, and its doorbells still ring.
            log.warning("turn_report_unpublished", events=len(events), exc_info=True)
        finally:
            run_after_commit(self.rings)


@dataclass
class KeptEvents:
    """What a turn published on its session's stream, in order, for its commit to keep."""

    session_id: str
    turn_id: str
    skip: int = 0  # the first events through are not the turn's (a run's leading ones)
    events: list[StreamEvent] = field(default_factory=list)
    closed: bool = False  # taken by the commit: later events are not the turn's

    def mark(self, events: Sequence[StreamEvent]) -> list[StreamEvent]:
        """`events` as published: each of the turn's own gets its `t{turn}:{n}` mark and
        is kept; others (another session's, already marked, leading) pass as they are."""
        marked: list[StreamEvent] = []
        for event in events:
            if self.skip:
                self.skip -= 1
            elif not self.closed and not event.at and event.session_id == self.session_id:
                event = event._replace(at=Mark(turn_id=self.turn_id, n=len(self.events) + 1).text())
                self.events.append(event)
            marked.append(event)
        return marked

    def take(self) -> list[StreamEvent]:
        """The turn's events so far; nothing published later joins them."""
        self.closed = True
        return list(self.events)


class KeepingPublisher:
    """Marks and keeps a running turn's events (KeptEvents) on their way to `inner`."""

    def __init__(self, inner: StreamPublisher, kept: KeptEvents) -> None:
        self._inner = inner
        self.kept = kept

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.publish_many([StreamEvent(session_id, event_type, data)])

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        self._inner.publish_many(self.kept.mark(events))

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        self._inner.post_many(self.kept.mark(events))


class NullPublisher:
    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        return None

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        return None

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        return None


@dataclass
class RecordingPublisher:
    """Keeps every event, in order (the in-process twin and the tests' window)."""

    events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    calls: int = 0  # publish and publish_many calls: what a Redis publisher pays for
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def publish(self, session_id: str, event_type: str, data: dict[str, Any]) -> None:
        with self._lock:
            self.calls += 1
            self.events.append((session_id, event_type, data))

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        if not events:
            return
        with self._lock:
            self.calls += 1
            self.events.extend((e.session_id, e.type, e.data) for e in events)

    def post_many(self, events: Sequence[StreamEvent]) -> None:
        self.publish_many(events)

    def types(self, session_id: str | None = None) -> list[str]:
        return [kind for sid, kind, _ in self.events if session_id in (None, sid)]


def committed(
    session_id: str,
    turn_id: str,
    *,
    messages: Sequence[tuple[str, str]],
    consumed: Sequence[tuple[str, str]],
    status: str,
) -> list[StreamEvent]:
    """What a turn's commit reports, in one publish: each message it created (id, role),
    each queue item it consumed (id, disposition), then `turn.committed`."""
    events = [
        StreamEvent(
            session_id,
            MESSAGE_CREATED,
            {"message_id": message_id, "turn_id": turn_id, "role": role, "sequence": sequence},
        )
        for sequence, (message_id, role) in enumerate(messages, start=1)
    ]
    events.extend(
        StreamEvent(
            session_id,
            QUEUE_ITEM_CONSUMED,
            {"queue_item_id": item_id, "turn_id": turn_id, "disposition": disposition},
        )
        for item_id, disposition in consumed
    )
    events.append(StreamEvent(session_id, TURN_COMMITTED, {"turn_id": turn_id, "status": status}))
    return events


# Text deltas are published at most this often: a model streams a token every few
# milliseconds, and one stream write per token cost more than the rest of a turn's Redis
# traffic together. 50 ms is below what a person reading along can tell apart.
DELTA_INTERVAL_S = 0.05


@dataclass
class DeltaCoalescer:
    """Joins a stream's text deltas into one publishable delta per interval."""

    interval_s: float = DELTA_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    _pending: list[str] = field(default_factory=list)
    _last: float | None = None

    def add(self, text: str) -> str | None:
        """Take a delta; return the joined text when it is due to be published."""
        self._pending.append(text)
        now = self.clock()
        if self._last is not None and now - self._last < self.interval_s:
            return None
        self._last = now
        return self.drain()

    def drain(self) -> str | None:
        """Whatever is still pending (at the end of a stream, or before it is cut off)."""
        if not self._pending:
            return None
        text, self._pending = "".join(self._pending), []
        return text
