"""A committed turn keeps its stream events in the ledger (`session_events`), in its commit's
transaction: every event it published for its session, in order, then what its commit
reported and `session.completed`, numbered per session. The live events carry marks that
name their ledger rows. Rows are only ever appended."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from nexus.adapters.scripted import CallTools, Fail, Say
from nexus.db import Database
from nexus.engine.model import ModelError
from nexus.engine.stream_events import Mark
from nexus.ledger.repository.session_events import SessionEventRecord
from nexus.queueing.coordination import InProcessCoordination
from nexus.queueing.stream_log import START, StreamEntry
from tests.contract.engine_support import RecordingTool, Rig, build_rig
from tests.support import FakeClock, new_session

ROOT = Path(__file__).resolve().parents[2]


def _rig(
    database: Database, clock: FakeClock, **options: object
) -> tuple[Rig, InProcessCoordination]:
    rig = build_rig(database, clock, **options)  # type: ignore[arg-type]
    coordination = InProcessCoordination()
    rig.turns.publisher = coordination  # the stream as the SSE route reads it, marks and all
    return rig, coordination


def _kept(database: Database, session_id: str) -> list[SessionEventRecord]:
    with database.reading() as uow:
        return uow.ledger.session_events.page(session_id, limit=10_000)


def _live(coordination: InProcessCoordination, session_id: str) -> list[StreamEntry]:
    return coordination.read_stream(session_id, START, block_ms=1)


def test_a_committed_turn_keeps_every_event_it_sent_in_order(
    database: Database, clock: FakeClock
) -> None:
    tool = RecordingTool("lookup", answer="found it")
    rig, coordination = _rig(database, clock, tools=[tool], granted=["lookup"])
    session = rig.session(capabilities=["test_tools"])
    rig.model.push(CallTools((("lookup", {}),), text="Let me look."), Say("Here it is."))
    outcome = rig.say(session.id, "find it")
    assert outcome.status == "committed"
    live = _live(coordination, session.id)
    kept = _kept(database, session.id)
    assert [(e.type, e.data) for e in live] == [(r.type, r.data) for r in kept]
    assert [r.sequence for r in kept] == list(range(1, len(kept) + 1))
    assert {r.turn_id for r in kept} == {outcome.turn_id}
    types = [r.type for r in kept]
    assert types[0] == "session.started" and types[-1] == "session.completed"
    for needed in ("step.started", "message.delta", "tool.started", "tool.completed"):
        assert needed in types
    assert types[-2] == "turn.committed" and "message.created" in types


def test_each_live_event_names_its_ledger_row(database: Database, clock: FakeClock) -> None:
    rig, coordination = _rig(database, clock)
    session = rig.session()
    first = rig.say(session.id, "one")
    second = rig.say(session.id, "two")
    kept = {r.sequence: r for r in _kept(database, session.id)}
    firsts = {first.turn_id: 1}
    firsts[second.turn_id] = min(s for s, r in kept.items() if r.turn_id == second.turn_id)
    assert firsts[second.turn_id] > 1  # the second turn's numbers follow the first's
    for entry in _live(coordination, session.id):
        mark = Mark.read(entry.at)
        if mark.sequence is not None:  # published after the commit: its own number
            row = kept[mark.sequence]
        else:  # published while the turn ran: its turn's n-th
            assert mark.turn_id is not None and mark.n is not None
            row = kept[firsts[mark.turn_id] + mark.n - 1]
        assert (row.type, row.data) == (entry.type, entry.data)


def test_a_failed_attempt_keeps_nothing_and_its_events_stay_unnumbered(
    database: Database, clock: FakeClock
) -> None:
    rig, coordination = _rig(database, clock)
    session = rig.session()
    rig.model.push(Fail(ModelError("rate_limit", "busy"), partial_text="Half"))
    rig.say(session.id, "try")
    assert _kept(database, session.id) == []
    assert all(not Mark.read(e.at).sequence for e in _live(coordination, session.id))


def test_sequences_are_per_session_and_one_number_is_written_once(database: Database) -> None:
    with database.unit_of_work() as uow:
        one, two = new_session(uow.ledger, "one"), new_session(uow.ledger, "two")
        events = uow.ledger.session_events
        assert events.append(one.id, "t1", [("a", {}), ("b", {"x": 1})]) == [1, 2]
        assert events.append(two.id, "t2", [("a", {})]) == [1]
        assert events.append(one.id, "t3", [("c", {})]) == [3]
        assert events.turn_span(one.id, "t1") == (1, 2)
        assert events.last_sequence(one.id) == 3 and events.last_sequence(two.id) == 1
        uow.commit()
    with database.unit_of_work() as uow:
        row = uow.ledger.session_events.page(one.id, after=2)[0]
        assert (row.sequence, row.type, row.turn_id) == (3, "c", "t3")
        assert uow.ledger.session_events.sequence_of(one.id, row.id) == 3
        assert uow.ledger.session_events.sequence_of(two.id, row.id) is None
    # Two writers of one number: the second is refused, never a second row 3.
    with database.unit_of_work() as uow, pytest.raises(IntegrityError):
        uow.connection.exec_driver_sql(
            "INSERT INTO session_events (id, session_id, sequence, type, data, turn_id,"
            f" created_at) VALUES ('dup', '{one.id}', 3, 'x', '{{}}', NULL, 0)"
        )


def test_no_code_updates_or_deletes_a_kept_event() -> None:
    """Append-only: one module reaches the table (its model, through the repository's table
    declarations), and it inserts and reads."""
    reaching = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "nexus").rglob("*.py")
        if re.search(r"\bSessionEvent\b", path.read_text()) and "migrations" not in path.parts
    )
    assert reaching == [
        "nexus/ledger/models/__init__.py",
        "nexus/ledger/models/session_events.py",
        "nexus/ledger/repository/tables.py",  # declares it; the line below checks who uses it
    ]
    using_the_table = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "nexus").rglob("*.py")
        if any(
            isinstance(node, ast.ImportFrom)
            and node.module == "nexus.ledger.repository.tables"
            and any(alias.name == "session_events" for alias in node.names)
            for node in ast.walk(ast.parse(path.read_text()))
        )
        or re.search(r"tables\.session_events\b", path.read_text())
    )
    assert using_the_table == ["nexus/ledger/repository/session_events.py"]
    source = (ROOT / "nexus/ledger/repository/session_events.py").read_text()
    assert not re.search(r"\b(update|delete)\s*\(", source)
    assert not re.search(r"\b(UPDATE|DELETE)\b", source)
    for path in (ROOT / "nexus").rglob("*.py"):  # nor raw SQL anywhere else
        assert not re.search(r"(UPDATE|DELETE\s+FROM)\s+session_events", path.read_text(), re.I)
