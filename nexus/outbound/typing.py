"""The typing indicator while a turn runs: an optional capability of a sender, shown
best-effort from a background thread so a turn never waits for it nor fails by it.

A sender that can show typing (`TypingSender`: BlueBubbles today) is told "on" when a
session's turn starts answering an input from its platform, and "off" when the turn ends,
whatever its end (committed, fenced, failed, crashed). The calls go through one daemon
thread per process, in order (so a chat's "off" never overtakes its "on"), through a
bounded queue: when the platform is slow the queue fills and further indications are
dropped, never waited for. An input from a platform whose sender has no typing costs a
dictionary lookup: no statement, no Redis round trip, no thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import structlog

from nexus.ledger.records import EventRecord
from nexus.outbound.addressing import ADDRESSED_FROM_PAYLOAD, address_for
from nexus.outbound.ports import SendResult, Sent

log = structlog.get_logger(__name__)

MAX_WAITING = 256  # indications queued behind a slow platform; more are dropped


@runtime_checkable
class TypingSender(Protocol):
    """A sender that can show (`on`) or stop the typing indicator where a reply goes."""

    name: str

    def typing(self, target: Mapping[str, Any], *, on: bool) -> SendResult: ...


@dataclass(frozen=True)
class Typing:
    """Where a running turn's typing indicator shows: the sender and its reply target."""

    sender: str
    target: dict[str, Any]


def typing_for(event: EventRecord | None, senders: Mapping[str, object]) -> Typing | None:
    """Where the turn answering `event` shows that it is typing, or None: the input came
    from no platform, or its sender has no typing indicator (pure)."""
    if event is None or event.direction != "inbound":
        return None
    sender = senders.get(event.adapter)
    if not isinstance(sender, TypingSender) or event.adapter in ADDRESSED_FROM_PAYLOAD:
        return None  # typing goes where the reply goes: an address read from columns only
    address = address_for(event, {})
    if address is None or address.sender != sender.name:
        return None
    return Typing(sender.name, dict(address.target))


class TypingIndicator:
    """Shows a turn's typing indicator from one background thread (started on first use).

    `started` and `stopped` return at once: they only queue the call."""

    def __init__(self, senders: Callable[[], Mapping[str, object]]) -> None:
        self._senders = senders  # read on first use: the registry is built lazily
        self._waiting: queue.Queue[tuple[Typing, bool]] = queue.Queue(MAX_WAITING)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def started(self, event: EventRecord | None) -> Typing | None:
        """Show typing where the answer to `event` goes; what to hand `stopped`, or None."""
        shown = typing_for(event, self._senders()) if event is not None else None
        if shown is not None:
            self._put(shown, on=True)
        return shown

    def stopped(self, shown: Typing | None) -> None:
        if shown is not None:
            self._put(shown, on=False)

    def flush(self) -> None:
        """Wait until every queued indication was sent (tests, and a graceful stop)."""
        self._waiting.join()

    def _put(self, shown: Typing, *, on: bool) -> None:
        self._ensure_thread()
        try:
            self._waiting.put_nowait((shown, on))
        except queue.Full:
            log.warning("typing_dropped", sender=shown.sender, on=on)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="nexus-typing", daemon=True
                )
                self._thread.start()

    def _serve(self) -> None:
        while True:
            shown, on = self._waiting.get()
            try:
                self._send(shown, on=on)
            finally:
                self._waiting.task_done()

    def _send(self, shown: Typing, *, on: bool) -> None:
        sender = self._senders().get(shown.sender)
        if not isinstance(sender, TypingSender):
            return
        try:
            result = sender.typing(shown.target, on=on)
        except Exception:  # a bug in a sender must not end the thread
            log.exception("typing_error", sender=shown.sender, on=on)
            return
        if not isinstance(result, Sent):
            # Best effort: the answer is what matters, the indicator only a courtesy.
            log.info("typing_not_shown", sender=shown.sender, on=on, error=result.error)
