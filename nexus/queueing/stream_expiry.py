"""How long a session's stream stays in Redis after a publish (pure).

The stream is the live feed and the first place a reconnecting SSE client is served from;
the ledger keeps every committed turn's events for good (docs/operations.md, "Session
events"), and a reconnect whose `Last-Event-ID` Redis no longer holds is served from there.
So the stream need outlive its last publish by an hour only while it carries what the
ledger does not have yet, a running turn's events; once a turn's commit has reported (its
last event carries its place in the ledger), a short replay window is enough, and an idle
session's stream is gone soon after its last answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from nexus.engine.stream_events import (
    QUEUE_ITEM_DEAD,
    QUEUE_ITEM_DROPPED,
    QUEUE_ITEM_QUEUED,
    Mark,
    StreamEvent,
)

# While a turn runs: its events are on the stream alone until its commit keeps them.
STREAM_TTL_S = 3_600
# After a commit's report: a client that reconnects within it is served from Redis (the
# events the ledger does not keep, a queue's, included); later, from the ledger.
STREAM_REPLAY_WINDOW_S = 60
# What the queue says of its items, published by whoever decided it (the API, the router,
# a run's failure); they neither start nor end a run.
_QUEUE_EVENTS = frozenset({QUEUE_ITEM_QUEUED, QUEUE_ITEM_DROPPED, QUEUE_ITEM_DEAD})


class Expiry(NamedTuple):
    """A stream's time to live after a publish: `seconds`, or with `at_least`, whichever is
    longer of `seconds` and what it has left (a running turn's hour is not cut short)."""

    seconds: int
    at_least: bool = False


def stream_expiries(
    events: Sequence[StreamEvent],
    *,
    window_s: int = STREAM_REPLAY_WINDOW_S,
    running_s: int = STREAM_TTL_S,
) -> dict[str, Expiry]:
    """Each session's stream expiry after publishing `events` (in the order they came):

    - its last event is in the ledger (a commit's report, `session.completed` last): the
      turn's events are all kept, so the replay window;
    - any other event of a run (a turn's progress, a failed attempt's, a `/compact` run's,
      which the ledger does not keep): the hour, as before;
    - only the queue's events (a message queued, dropped or dead-lettered beside a run or
      none): at least the window, never shortening a running turn's hour."""
    found: dict[str, Expiry] = {}
    last: dict[str, StreamEvent] = {}
    ran: set[str] = set()
    for event in events:
        last[event.session_id] = event
        if event.type not in _QUEUE_EVENTS:
            ran.add(event.session_id)
    for session_id, event in last.items():
        if Mark.read(event.at).sequence is not None:
            found[session_id] = Expiry(window_s)
        elif session_id in ran:
            found[session_id] = Expiry(running_s)
        else:
            found[session_id] = Expiry(window_s, at_least=True)
    return found
