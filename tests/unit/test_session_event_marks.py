"""The marks that tie a stream event to its ledger row, the SSE ids made of them, and how a
running turn's events are marked and kept for its commit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nexus.engine.kept import as_sent
from nexus.engine.stream import (
    KeepingPublisher,
    KeptEvents,
    LeadingPublisher,
    RecordingPublisher,
)
from nexus.engine.stream_events import Mark, StreamEvent
from nexus.queueing.stream_log import BadStreamId, ResumeId, parse_resume_id, resume_id_text

NOW_MS = 1_700_000_000_000


def test_marks_read_back_what_they_say() -> None:
    assert Mark.read(Mark(sequence=42).text()) == Mark(sequence=42)
    assert Mark.read(Mark(turn_id="01T", n=3).text()) == Mark(turn_id="01T", n=3)
    for unreadable in ("", "s", "sx", "t01T", "t:3", "t01T:", "x42"):
        assert Mark.read(unreadable) == Mark()


def test_sse_ids_carry_the_stream_id_and_the_ledger_place() -> None:
    plain = resume_id_text("1700000000000-2", 7)
    assert plain == "1700000000000-2.7"
    assert parse_resume_id(plain, now_ms=NOW_MS) == ResumeId("1700000000000-2", 7)
    running = resume_id_text("1700000000000-2", 7, "01TURN", 4)
    assert parse_resume_id(running, now_ms=NOW_MS) == ResumeId("1700000000000-2", 7, "01TURN", 4)
    # A bare stream id, as sent before the ledger kept events, is still read.
    assert parse_resume_id("1700000000000-2", now_ms=NOW_MS) == ResumeId("1700000000000-2")


@pytest.mark.parametrize(
    "value", ["1-0.", "1-0.x", "1-0.7.", "1-0.7.T", "1-0.7.T.", "1-0.7.T.x", "1-0.7.T.1.2", "x.7"]
)
def test_a_malformed_sse_id_is_refused_with_a_reason(value: str) -> None:
    with pytest.raises(BadStreamId, match="stream event id"):
        parse_resume_id(value, now_ms=NOW_MS)


def _event(kind: str, session: str = "s1", at: str = "") -> StreamEvent:
    return StreamEvent(session, kind, {}, at)


def test_a_turn_marks_and_keeps_its_own_events_only() -> None:
    inner = RecordingPublisher()
    kept = KeptEvents("s1", "T", skip=1)
    publisher = KeepingPublisher(inner, kept)
    publisher.publish_many([_event("queue.item.queued"), _event("session.started")])
    publisher.post_many([_event("step.started"), _event("x", session="other")])
    publisher.publish_many([_event("turn.committed", at="s9")])  # marked already: as it is
    assert [e.type for e in kept.events] == ["session.started", "step.started"]
    assert [e.at for e in kept.events] == ["tT:1", "tT:2"]
    assert kept.take() == kept.events and kept.closed
    publisher.publish("s1", "compaction", {})  # after the commit took them: not the turn's
    assert len(kept.events) == 2


def test_what_a_leading_publisher_holds_is_kept_when_the_commit_asks() -> None:
    inner = RecordingPublisher()
    kept = KeptEvents("s1", "T")
    leading = LeadingPublisher(KeepingPublisher(inner, kept), [_event("session.started")])
    leading.publish_many([_event("step.started")])
    leading.hold([_event("step.generated")])
    leading.keep_held(kept)
    assert [e.type for e in kept.take()] == ["session.started", "step.started", "step.generated"]
    leading.flush()  # goes out marked, and is not kept twice
    assert inner.types() == ["session.started", "step.started", "step.generated"]
    assert len(kept.events) == 3


def test_kept_data_is_what_the_stream_sent_without_nul() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    assert as_sent({"at": when, "n": 1, "deep": [{"t\x00": "a\x00b"}]}) == {
        "at": str(when),
        "n": 1,
        "deep": [{"t\ufffd": "a\ufffdb"}],
    }
