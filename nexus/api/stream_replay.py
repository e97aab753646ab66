"""The SSE stream's replay: where a (re)connecting client starts, and the frames it gets —
the ledger's kept events when Redis no longer has what it missed, then Redis's entries as
they come, each kept event once (docs/operations.md, "Session events")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import structlog
from fastapi.concurrency import run_in_threadpool

from nexus.bootstrap import Nexus
from nexus.db import Database
from nexus.engine.stream_events import Mark
from nexus.ledger.repository.session_events import SessionEventRecord
from nexus.queueing.coordination import Coordination, CoordinationUnavailable
from nexus.queueing.stream_log import ResumeId, resume_id_text
from nexus.sessions import service as sessions

log = structlog.get_logger(__name__)
# Rows read per statement while a reconnect replays from the ledger.
REPLAY_PAGE = 200


@dataclass
class StreamStart:
    """Where an SSE stream starts: Redis entries after `stream_id`, the client having every
    kept event up to `known`; first the ledger's rows after `ledger_after`, when Redis has
    lost what the client missed."""

    stream_id: str
    known: int
    ledger_after: int | None = None
    turn_id: str | None = None  # the running turn the client was in, and its n-th event
    n: int = 0


async def stream_start(
    database: Database, coordination: Coordination, session_id: str, resume: ResumeId | None
) -> StreamStart:
    """Where to start (raises CoordinationUnavailable when Redis does not answer)."""
    if resume is None or resume.known is None:
        # Read before the stream's tail: a lower bound, so a later replay repeats, never skips.
        known = await run_in_threadpool(_last_sequence, database, session_id)
        if resume is None:
            return StreamStart(await coordination.stream_tail_async(session_id), known)
        return StreamStart(resume.stream_id, known)  # a bare id: Redis alone, as before
    start = StreamStart(resume.stream_id, resume.known, None, resume.turn_id, resume.n or 0)
    if await coordination.stream_holds_async(session_id, resume.stream_id):
        return start  # Redis has all since: nothing was trimmed or lost after it
    start.ledger_after = await run_in_threadpool(_position, database, session_id, resume)
    return start


def _last_sequence(database: Database, session_id: str) -> int:
    with database.reading() as uow:
        return sessions.last_sequence(uow, session_id)


def _position(database: Database, session_id: str, resume: ResumeId) -> int:
    with database.reading() as uow:
        return sessions.ledger_position(uow, session_id, resume)


def _rows(database: Database, session_id: str, after: int, limit: int) -> list[SessionEventRecord]:
    with database.reading() as uow:
        return sessions.events_after(uow, session_id, after, limit)


def _between(database: Database, session_id: str, low: int, high: int) -> list[SessionEventRecord]:
    """The session's kept events strictly between two sequences."""
    found: list[SessionEventRecord] = []
    while low + 1 < high:
        rows = _rows(database, session_id, low, min(REPLAY_PAGE, high - low - 1))
        found.extend(row for row in rows if row.sequence < high)
        if not rows:
            break
        low = rows[-1].sequence
    return found


def frame(event_id: str, event_type: str, data: dict[str, Any]) -> str:
    body = json.dumps(data, separators=(",", ":"), default=str)
    return f"id: {event_id}\nevent: {event_type}\ndata: {body}\n\n"


@dataclass
class _Sent:
    """What one SSE connection has sent of the kept events, to send each once."""

    known: int  # every kept event up to this sequence
    replayed: int = 0  # the ledger replay went up to here
    replayed_turns: set[str] = field(default_factory=set)
    floor: dict[str, int] = field(default_factory=dict)  # a turn's events up to n were seen
    seen: dict[str, set[int]] = field(default_factory=dict)  # and these past it

    def saw(self, turn_id: str, n: int) -> bool:
        return n <= self.floor.get(turn_id, 0) or n in self.seen.get(turn_id, ())


async def stream_events(
    graph: Nexus, session_id: str, start: StreamStart, *, block_ms: int
) -> AsyncIterator[str]:
    """The SSE frames after `start`: the ledger's rows first when Redis lost them, then Redis
    entries as they come, each kept event once. Runs on the event loop."""
    coordination, database = graph.coordination, graph.database
    sent = _Sent(start.known)
    if start.turn_id is not None:
        sent.floor[start.turn_id] = start.n
    after = start.stream_id
    if start.ledger_after is not None:
        position = start.ledger_after
        while True:
            rows = await run_in_threadpool(_rows, database, session_id, position, REPLAY_PAGE)
            for row in rows:
                position = row.sequence
                if row.turn_id is not None:
                    sent.replayed_turns.add(row.turn_id)
                yield frame(resume_id_text(after, position), row.type, row.data)
            if len(rows) < REPLAY_PAGE:
                break
        sent.replayed = position
        sent.known = max(sent.known, position)
    while True:
        try:
            entries = await coordination.read_stream_async(session_id, after, block_ms=block_ms)
        except CoordinationUnavailable as error:
            # End the stream: the client reconnects after `retry` with its Last-Event-ID and
            # misses nothing kept (the ledger), nor what Redis kept.
            log.warning("stream_unavailable", session_id=session_id, error=str(error))
            return
        if not entries:
            yield ": keep-alive\n\n"
            continue
        for entry in entries:
            after = entry.id
            mark = Mark.read(entry.at)
            if mark.sequence is not None:
                if mark.sequence <= sent.replayed:
                    continue  # sent already, from the ledger
                if mark.sequence > sent.known + 1:
                    # Kept events the stream lost before this one (a running turn's, say,
                    # published while Redis was flushed): from the ledger, each once.
                    gap = await run_in_threadpool(
                        _between, database, session_id, sent.known, mark.sequence
                    )
                    for row in _unseen(sent, gap):
                        yield frame(resume_id_text(after, sent.known), row.type, row.data)
                sent.known = max(sent.known, mark.sequence)
                yield frame(resume_id_text(after, sent.known), entry.type, entry.data)
            elif mark.turn_id is not None and mark.n is not None:
                if mark.turn_id in sent.replayed_turns or sent.saw(mark.turn_id, mark.n):
                    continue
                if mark.turn_id not in sent.floor:
                    sent.floor[mark.turn_id] = mark.n - 1  # joined the turn here
                sent.seen.setdefault(mark.turn_id, set()).add(mark.n)
                text = resume_id_text(after, sent.known, mark.turn_id, mark.n)
                yield frame(text, entry.type, entry.data)
            else:
                yield frame(resume_id_text(after, sent.known), entry.type, entry.data)


def _unseen(sent: _Sent, rows: list[SessionEventRecord]) -> list[SessionEventRecord]:
    """The gap's rows this connection has not sent: a turn's n-th counts from its first row."""
    firsts: dict[str, int] = {}
    for row in rows:
        if row.turn_id is not None:
            firsts.setdefault(row.turn_id, row.sequence)
    unseen = []
    for row in rows:
        turn = row.turn_id
        if (
            turn is None
            or turn not in sent.floor
            or not sent.saw(turn, row.sequence - firsts[turn] + 1)
        ):
            unseen.append(row)
    return unseen
