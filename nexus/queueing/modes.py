"""What a session runs next, by queue mode (docs/runtime.md): a pure decision over items.

The mode of an item decides two things: what happens when it arrives while a turn is
running (signals, decided in `arrival_action`), and how it is picked once the session is
free (`next_work`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from nexus.ledger.enums import Disposition, QueueMode
from nexus.ledger.records import QueueItemRecord
from nexus.queueing.settings import DEBOUNCE_KEY

DEFAULT_COLLECT_WINDOW_MS = 1_000
ArrivalAction = Literal["abort", "steer", "none"]
Command = Literal["compact"]
# A queue item that asks the session to do something other than answer (`payload.command`):
# it waits its turn like any input, so it runs under the session's lease, never beside a turn.
COMPACT: Command = "compact"


def command_of(item: QueueItemRecord) -> Command | None:
    return COMPACT if item.payload.get("command") == COMPACT else None


@dataclass(frozen=True)
class Run:
    """Run one turn over these items (oldest first) with this disposition for each."""

    items: tuple[QueueItemRecord, ...]
    disposition: Disposition
    mode: QueueMode
    command: Command | None = None


@dataclass(frozen=True)
class WaitUntil:
    """Nothing may run before `at_ms` (a collect window still open)."""

    at_ms: int


@dataclass(frozen=True)
class Idle:
    pass


Plan = Run | WaitUntil | Idle


def arrival_action(mode: QueueMode) -> ArrivalAction:
    """What an item asks of a turn already running when it arrives."""
    if mode == QueueMode.INTERRUPT:
        return "abort"
    if mode in (QueueMode.STEER, QueueMode.STEER_BACKLOG):
        return "steer"
    return "none"


def next_work(
    queued: Sequence[QueueItemRecord], *, now_ms: int,
    collect_window_ms: int = DEFAULT_COLLECT_WINDOW_MS,
) -> Plan:  # fmt: skip
    """The next turn's inputs, given the session's queued items in queue order.

    The oldest item gates the rest: if it is not available yet (a retry backoff), nothing
    runs before it.

    - interrupt anywhere in the queue: everything queued runs as one batch (the backlog and
      the interrupting message together, as one batch turn);
    - collect: once the window after the last collect item has passed, all collect items
      run as one turn; until then the session waits (other modes wait behind them, so
      order is kept);
    - followup, queue, steer, steer-backlog (when no turn is running to take it): the
      oldest item alone, fresh context each;
    - a command (a compaction asked for through the API or CLI) runs alone when it is the
      oldest, and no batch reaches past it, so it lands exactly where it was asked for.
    """
    if not queued:
        return Idle()
    if queued[0].available_at > now_ms:
        # The oldest input is backing off after a failure: later ones wait behind it, so a
        # conversation is answered in the order it was said.
        return WaitUntil(at_ms=queued[0].available_at)
    ready = [item for item in queued if item.available_at <= now_ms]
    if (command := command_of(ready[0])) is not None:
        first = ready[0]
        return Run(
            items=(first,), disposition=Disposition.CONSUMED, mode=first.mode, command=command
        )
    ready = ready[: next((i for i, item in enumerate(ready) if command_of(item)), len(ready))]
    if any(item.mode == QueueMode.INTERRUPT for item in ready):
        return _batch(ready, QueueMode.INTERRUPT)
    first = ready[0]
    if first.mode == QueueMode.COLLECT:
        collected = [item for item in ready if item.mode == QueueMode.COLLECT]
        # Each item's window is the one it arrived under (a session's or policy's debounce),
        # else the deployment's.
        closes = max(item.enqueued_at + _window(item, collect_window_ms) for item in collected)
        if closes > now_ms:
            return WaitUntil(at_ms=closes)
        return _batch(collected, QueueMode.COLLECT)
    return Run(items=(first,), disposition=Disposition.CONSUMED, mode=first.mode)


def _window(item: QueueItemRecord, default_ms: int) -> int:
    chosen = item.payload.get(DEBOUNCE_KEY)
    return chosen if isinstance(chosen, int) and not isinstance(chosen, bool) else default_ms


def _batch(items: Sequence[QueueItemRecord], mode: QueueMode) -> Run:
    disposition = Disposition.BATCHED if len(items) > 1 else Disposition.CONSUMED
    return Run(items=tuple(items), disposition=disposition, mode=mode)
