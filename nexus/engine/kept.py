"""A committed turn's stream events, kept in the ledger by its commit (docs/operations.md,
"Session events")."""

from __future__ import annotations

import json
from typing import Any

from nexus.db import UnitOfWork
from nexus.engine.credentials import Scrubber
from nexus.engine.stream import LeadingPublisher, Report, StreamPublisher
from nexus.engine.stream_events import MESSAGE_DELTA, SESSION_COMPLETED, Mark, StreamEvent


def keep_turn_events(
    uow: UnitOfWork,
    report: Report,
    turn_id: str,
    reported: list[StreamEvent],
    publisher: StreamPublisher,
    *,
    scrubber: Scrubber | None = None,
) -> list[StreamEvent]:
    """Keep a committed turn's events in the ledger, in its commit's transaction (one
    multi-row INSERT): what it published while it ran (`report.kept`), what its commit
    reports (`reported`) and how its run ends (`session.completed`, set on
    `report.ending`). Answers `reported` marked with the sequences the rows got, to be
    published after the commit; unchanged when the run keeps nothing. `publisher` is the
    turn's: what it still holds (a model call's end, held to ride with the next publish)
    was published by the turn, and is kept with the rest. The rows are scrubbed of the
    secrets the turn's tools were given (`scrubber`), as its messages are."""
    if report.kept is None or not reported:
        return reported
    if isinstance(publisher, LeadingPublisher):
        publisher.keep_held(report.kept)
    session_id = reported[0].session_id
    ending = StreamEvent(session_id, SESSION_COMPLETED, {"turn_id": turn_id, "status": "committed"})
    ran = report.kept.take()
    after = [*reported, ending]
    rows = [(event.type, as_sent(event.data)) for event in (*ran, *after)]
    sequences = uow.ledger.session_events.append(
        session_id, turn_id, scrubbed(rows, scrubber) if scrubber else rows
    )
    marked = [
        event._replace(at=Mark(sequence=sequence).text())
        for event, sequence in zip(after, sequences[len(ran) :], strict=True)
    ]
    report.ending = marked[-1]
    return marked[:-1]


def as_sent(data: dict[str, Any]) -> dict[str, Any]:
    """`data` as the stream sent it (JSON, anything else as its text), without NUL, which
    Postgres's JSONB refuses: a kept event never fails its turn's commit."""
    found: dict[str, Any] = json.loads(json.dumps(data, default=str), object_hook=_no_nul)
    return found


def _no_nul(found: dict[str, Any]) -> dict[str, Any]:
    return {_text(key): _value(value) for key, value in found.items()}


def _value(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        return [_value(item) for item in value]
    return value


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd")


def scrubbed(
    rows: list[tuple[str, dict[str, Any]]], scrubber: Scrubber
) -> list[tuple[str, dict[str, Any]]]:
    """`rows` with every secret `scrubber` knows replaced, the same number of rows in the
    same order. A secret may straddle the deltas it streamed in: each run of consecutive
    `message.delta` rows is scrubbed as one text, which its first row then carries whole
    (the others carry ""), so the run still reads as the same text, scrubbed."""
    out = [(kind, scrubber.scrub(data)) for kind, data in rows]
    start = 0
    while start < len(rows):
        if rows[start][0] != MESSAGE_DELTA:
            start += 1
            continue
        end = start
        while end < len(rows) and rows[end][0] == MESSAGE_DELTA:
            end += 1
        texts = [str(rows[i][1].get("text", "")) for i in range(start, end)]
        joined = "".join(texts)
        if scrubber.text(joined) != joined:
            out[start] = (MESSAGE_DELTA, {**out[start][1], "text": scrubber.text(joined)})
            for i in range(start + 1, end):
                out[i] = (MESSAGE_DELTA, {**out[i][1], "text": ""})
        start = end
    return out
