"""A session's kept stream events (every event of each committed turn, in sequence order):
read page by page, and where a reconnecting stream client stands among them
(docs/operations.md, "Session events")."""

from __future__ import annotations

from nexus.db import UnitOfWork
from nexus.ids import now_ms
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository.session_events import SessionEventRecord
from nexus.queueing.stream_log import BadStreamId, ResumeId, parse_resume_id
from nexus.sessions.entries import get

_MAX_SEQUENCE = 2**63 - 1


class InvalidAfter(ValueError):
    """A place to start after that names none of the session's events."""


def event_page(
    uow: UnitOfWork, label: str, *, after: int | str | None, limit: int
) -> tuple[SessionRecord, list[SessionEventRecord]]:
    """The live session `label` and up to `limit` of its kept events after `after`: a
    sequence number (an int: a page's cursor), or as a caller gives it (a sequence, a kept
    event's id, or an SSE event id; InvalidAfter when it is none of these)."""
    session = get(uow, label)
    start = after if isinstance(after, int) else _after(uow, session.id, after) if after else 0
    return session, uow.ledger.session_events.page(session.id, after=start, limit=limit)


def _after(uow: UnitOfWork, session_id: str, after: str) -> int:
    """The sequence `after` names in the session, or InvalidAfter saying why not."""
    if after.isascii() and after.isdigit():
        if int(after) > _MAX_SEQUENCE:
            raise InvalidAfter(f"after={after[:32]!r} is out of range")
        return int(after)
    if "-" in after:
        try:
            resume = parse_resume_id(after, now_ms=now_ms())
        except BadStreamId as error:
            raise InvalidAfter(f"after: {error}") from error
        if resume.known is None:
            raise InvalidAfter(
                f"after={after[:64]!r} is a bare stream id: it names no place in the ledger "
                "(ids the stream sends now look like 1700000000000-0.42)"
            )
        return ledger_position(uow, session_id, resume)
    found = uow.ledger.session_events.sequence_of(session_id, after)
    if found is None:
        raise InvalidAfter(
            f"after={after[:64]!r} is not a sequence number, an SSE event id or the id of "
            "one of this session's events"
        )
    return found


def ledger_position(uow: UnitOfWork, session_id: str, resume: ResumeId) -> int:
    """The last kept event a client with this id had: its turn's n-th when the turn is kept
    (a running turn's event), else the newest kept event it was sent."""
    known = resume.known or 0
    if resume.turn_id is not None and resume.n is not None:
        span = uow.ledger.session_events.turn_span(session_id, resume.turn_id)
        if span is not None:
            first, last = span
            return max(known, min(first + resume.n - 1, last))
    return known


def last_sequence(uow: UnitOfWork, session_id: str) -> int:
    """The sequence of the session's newest kept event (0: none yet)."""
    return uow.ledger.session_events.last_sequence(session_id)


def events_after(
    uow: UnitOfWork, session_id: str, after: int, limit: int
) -> list[SessionEventRecord]:
    """Up to `limit` of the session's kept events after the sequence `after`."""
    return uow.ledger.session_events.page(session_id, after=after, limit=limit)
