"""How long a session's stream stays in Redis after a publish (nexus/queueing/stream_expiry.py)."""

from __future__ import annotations

from nexus.engine.stream_events import (
    MESSAGE_CREATED,
    MESSAGE_DELTA,
    QUEUE_ITEM_CONSUMED,
    QUEUE_ITEM_DEAD,
    QUEUE_ITEM_DROPPED,
    QUEUE_ITEM_QUEUED,
    SESSION_COMPLETED,
    SESSION_FAILED,
    SESSION_STARTED,
    STEP_STARTED,
    TURN_COMMITTED,
    Mark,
    StreamEvent,
)
from nexus.queueing.stream_expiry import (
    STREAM_REPLAY_WINDOW_S,
    STREAM_TTL_S,
    Expiry,
    stream_expiries,
)


def _event(kind: str, session: str = "s1", *, sequence: int | None = None) -> StreamEvent:
    at = Mark(sequence=sequence).text() if sequence is not None else ""
    return StreamEvent(session, kind, {}, at)


def _report(session: str = "s1", first: int = 5) -> list[StreamEvent]:
    """A committed turn's report, as its commit marks it, `session.completed` last."""
    kinds = (MESSAGE_CREATED, QUEUE_ITEM_CONSUMED, TURN_COMMITTED, SESSION_COMPLETED)
    return [_event(kind, session, sequence=first + n) for n, kind in enumerate(kinds)]


def test_a_commits_report_leaves_the_stream_the_replay_window() -> None:
    assert stream_expiries(_report()) == {"s1": Expiry(STREAM_REPLAY_WINDOW_S)}
    assert STREAM_REPLAY_WINDOW_S < STREAM_TTL_S


def test_a_running_turns_events_keep_the_hour() -> None:
    running = [
        _event(QUEUE_ITEM_QUEUED),  # the router's announcement, riding with the first publish
        _event(SESSION_STARTED),
        StreamEvent("s1", STEP_STARTED, {}, Mark(turn_id="t1", n=1).text()),
        StreamEvent("s1", MESSAGE_DELTA, {"text": "hi"}, Mark(turn_id="t1", n=2).text()),
    ]
    assert stream_expiries(running) == {"s1": Expiry(STREAM_TTL_S)}


def test_what_the_ledger_does_not_keep_keeps_the_hour() -> None:
    """A failed attempt's end, and a `/compact` run's report (not marked): only on the stream."""
    assert stream_expiries([_event(SESSION_FAILED)]) == {"s1": Expiry(STREAM_TTL_S)}
    compacted = [_event(QUEUE_ITEM_CONSUMED), _event(TURN_COMMITTED)]
    assert stream_expiries(compacted) == {"s1": Expiry(STREAM_TTL_S)}


def test_the_queues_own_events_never_shorten_a_running_turns_hour() -> None:
    for kind in (QUEUE_ITEM_QUEUED, QUEUE_ITEM_DROPPED, QUEUE_ITEM_DEAD):
        found = stream_expiries([_event(kind)])
        assert found == {"s1": Expiry(STREAM_REPLAY_WINDOW_S, at_least=True)}


def test_each_session_is_judged_by_its_own_events() -> None:
    events = [*_report("a"), _event(QUEUE_ITEM_QUEUED, "b"), _event(SESSION_STARTED, "c")]
    assert stream_expiries(events, window_s=7, running_s=99) == {
        "a": Expiry(7),
        "b": Expiry(7, at_least=True),
        "c": Expiry(99),
    }


def test_a_later_event_after_the_report_decides() -> None:
    """The report, then (in the same publish) the next turn starting: the hour again."""
    events = [*_report(), _event(SESSION_STARTED)]
    assert stream_expiries(events) == {"s1": Expiry(STREAM_TTL_S)}
