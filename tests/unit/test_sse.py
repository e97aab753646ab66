"""The CLI's event-stream parser: the wire format, and where a reconnect resumes."""

from __future__ import annotations

from nexus.cli.sse import ServerEvent, SseParser


def _feed(parser: SseParser, text: str) -> list[ServerEvent]:
    found = [parser.feed(line) for line in text.split("\n")]
    return [event for event in found if event is not None]


def test_events_comments_retry_and_multiline_data() -> None:
    parser = SseParser()
    stream = (
        "retry: 2000\n\n"
        ": keep-alive\n\n"
        'id: 1-0\nevent: message.delta\ndata: {"text":"Hel"}\n\n'
        "id: 1-1\nevent: note\ndata: one\ndata:two\n\n"
        "data: no name\n\n"
    )
    assert _feed(parser, stream) == [
        ServerEvent("1-0", "message.delta", '{"text":"Hel"}'),
        ServerEvent("1-1", "note", "one\ntwo"),
        ServerEvent("1-1", "message", "no name"),  # the id carries over, as the format says
    ]
    assert parser.retry_ms == 2000 and parser.last_event_id == "1-1"


def test_an_event_cut_off_is_not_skipped_on_resume() -> None:
    """Its id line arrives first: resuming after it would lose it."""
    parser = SseParser(last_event_id="5-0")
    assert _feed(parser, "id: 6-0\nevent: turn.committed\ndata: {}") == []
    parser.drop_partial()
    assert parser.last_event_id == "5-0"
    # The resumed stream sends it again, whole: seen once.
    assert _feed(parser, "id: 6-0\nevent: turn.committed\ndata: {}\n\n") == [
        ServerEvent("6-0", "turn.committed", "{}")
    ]
    assert parser.last_event_id == "6-0"


def test_unknown_fields_and_a_bad_retry_are_ignored() -> None:
    parser = SseParser()
    assert _feed(parser, "retry: soon\nfoo: bar\ndata: x\n\n") == [
        ServerEvent(None, "message", "x")
    ]
    assert parser.retry_ms is None
