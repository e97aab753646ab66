"""`compact_context`, the tool a persona calls to compact its own session, and the summary
model setting, on both databases."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from nexus.adapters.scripted import CallTools, Say, ScriptedModel
from nexus.db import Database, UnitOfWork
from nexus.doorbell import RecordingDoorbell
from nexus.engine.model import ModelPort, ModelUnavailable
from nexus.engine.turn import TurnResult
from nexus.ledger.enums import CompactionTrigger, MessageRole, QueueMode, TurnStatus, TurnType
from nexus.ledger.models import Compaction, table_of
from nexus.ledger.records import EventDraft, EventRecord, NewQueueItem, SessionRecord
from nexus.queueing.coordination import InProcessCoordination
from nexus.sessions.runner import SessionRunner
from tests.contract.engine_support import RecordingTool, Rig, build_rig
from tests.support import FakeClock

COMPACT = "compact_context"


def _talk(rig: Rig, session_id: str, turns: int) -> None:
    for number in range(turns):
        rig.model.push(Say(f"noted {number}"))
        rig.say(session_id, f"the invoice number is INV-{number}")


def _compaction_row(database: Database, turn_id: str) -> dict[str, Any]:
    with database.engine.connect() as connection:
        row = connection.execute(
            select(table_of(Compaction)).where(table_of(Compaction).c.turn_id == turn_id)
        ).one()
    return dict(row._mapping)


def _head(database: Database, session_id: str) -> str | None:
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.get(session_id)
    assert session is not None
    return session.thread_id


def _tool_results(database: Database, turn_id: str) -> list[dict[str, Any]]:
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(turn_id)
    assert view is not None
    return [m.content for m in view.messages if m.role == MessageRole.TOOL_RESULT]


def test_the_tool_compacts_the_session_right_after_its_turn_commits(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session(capabilities=["compaction"])
    _talk(rig, session.id, 3)
    rig.model.push(
        CallTools(((COMPACT, {"instructions": "keep the invoice numbers"}),), text="Tidying."),
        Say("Done; the older turns will be summarised."),
    )
    outcome = rig.say(session.id, "please compact when you are done")

    assert outcome.status == "committed"
    assert outcome.result is not None and outcome.result.status == TurnStatus.COMPLETED
    assert [c.status for c in outcome.compactions] == ["committed"]
    compaction_id = outcome.compactions[0].turn_id
    assert compaction_id is not None
    # The turn ran to its end on the full context, then the compaction followed it.
    results = _tool_results(database, outcome.turn_id)
    assert [r["result"]["status"] for r in results] == ["scheduled"]
    purposes = [r.purpose for r in rig.model.requests][-3:]
    assert purposes == ["turn", "turn", "summary"]
    assert "keep the invoice numbers" in rig.model.requests[-1].system
    with database.unit_of_work() as uow:
        compacted = uow.ledger.threads.get_turn(compaction_id)
        ancestry = uow.ledger.threads.read_ancestry(compaction_id)
        context = uow.ledger.threads.read_context(compaction_id)
    assert compacted is not None and compacted.turn.turn_type == TurnType.COMPACTION
    assert compacted.turn.parent_turn_id == outcome.turn_id
    assert _head(database, session.id) == compaction_id
    # Append-only: every turn is still on the thread, the asking one included.
    assert [v.turn.turn_type for v in ancestry].count(TurnType.NORMAL) == 4
    assert context.compaction is not None
    assert context.compaction.trigger == CompactionTrigger.MANUAL
    assert context.compaction.instructions == "keep the invoice numbers"
    assert context.compaction.turns_summarized == 4 and context.turns == ()
    row = _compaction_row(database, compaction_id)
    assert row["metadata_json"]["requested_by"] == {
        "tool": COMPACT,
        "turn_id": outcome.turn_id,
        "tool_call_id": _call_ids(database, outcome.turn_id)[0],
    }
    # Watchers see the turn committed, then the compaction, then the session done.
    committed = [d["turn_id"] for _, kind, d in rig.publisher.events if kind == "turn.committed"][
        -2:
    ]
    assert committed == [outcome.turn_id, compaction_id]
    assert rig.publisher.types(session.id)[-1] == "session.completed"
    # The next turn reads the summary, not the turns it replaced.
    rig.model.push(Say("INV-1, as summarised."))
    rig.say(session.id, "which invoice came second?")
    first = rig.model.requests[-1].messages[0]["content"][0]["text"]
    assert first.startswith("[Previous conversation summary]")


def _call_ids(database: Database, turn_id: str) -> list[str | None]:
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(turn_id)
    assert view is not None
    return [m.tool_call_id for m in view.messages if m.role == MessageRole.TOOL_CALL]


def test_asking_again_in_the_same_turn_compacts_once(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session = rig.session(capabilities=["compaction"])
    _talk(rig, session.id, 2)
    rig.model.push(
        CallTools(((COMPACT, {"instructions": "first focus"}), (COMPACT, {}))),
        CallTools(((COMPACT, {"instructions": "second focus"}),)),
        Say("done"),
    )
    outcome = rig.say(session.id, "compact, compact, compact")

    statuses = [r["result"]["status"] for r in _tool_results(database, outcome.turn_id)]
    assert statuses == ["scheduled", "already_scheduled", "already_scheduled"]
    assert [c.status for c in outcome.compactions] == ["committed"]
    summaries = [r for r in rig.model.requests if r.purpose == "summary"]
    assert len(summaries) == 1 and "first focus" in summaries[0].system
    head = _head(database, session.id)
    with database.unit_of_work() as uow:
        ancestry = uow.ledger.threads.read_ancestry(head or "")
    kinds = [v.turn.turn_type for v in ancestry]
    assert kinds.count(TurnType.COMPACTION) == 1 and kinds[-1] == TurnType.COMPACTION


def test_a_persona_denied_the_tool_cannot_compact(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session = rig.session(
        capabilities=["compaction"], permissions={"tools": {"deny": ["compact_*"]}}
    )
    _talk(rig, session.id, 2)
    rig.model.push(CallTools(((COMPACT, {}),)), Say("I may not."))
    outcome = rig.say(session.id, "compact yourself")

    assert outcome.status == "committed" and outcome.compactions == ()
    (result,) = _tool_results(database, outcome.turn_id)
    assert "denied" in result["error"]
    assert all(r.purpose == "turn" for r in rig.model.requests)
    assert all(t.name != COMPACT for r in rig.model.requests for t in r.tools)
    assert _head(database, session.id) == outcome.turn_id


def test_an_aborted_turn_does_not_compact(database: Database, clock: FakeClock) -> None:
    stop = RecordingTool("stop_here")
    rig = build_rig(database, clock, tools=[stop], granted=["stop_here"])
    session = rig.session(capabilities=["compaction", "test_tools"])
    stop.on_call = lambda: rig.signals.request_abort(session.id)
    _talk(rig, session.id, 2)
    rig.model.push(CallTools(((COMPACT, {}), ("stop_here", {}))), Say("never said"))
    outcome = rig.say(session.id, "compact, then stop")

    assert outcome.status == "committed"
    assert outcome.result is not None and outcome.result.status == TurnStatus.ABORTED
    assert outcome.compactions == ()
    assert _head(database, session.id) == outcome.turn_id
    assert all(r.purpose == "turn" for r in rig.model.requests)


def test_a_newer_run_fences_the_asked_compaction_but_not_the_turn(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session(capabilities=["compaction"])
    _talk(rig, session.id, 2)

    def newer_run_claims(
        uow: UnitOfWork,
        _session: SessionRecord,
        _turn_id: str,
        _result: TurnResult,
        _source: EventRecord | None,
    ) -> None:
        uow.ledger.sessions.claim(session.id)  # committed with the turn: the epoch moves on

    rig.turns.commit_hooks = (newer_run_claims,)
    rig.model.push(CallTools(((COMPACT, {}),)), Say("done"))
    outcome = rig.say(session.id, "compact please")

    assert outcome.status == "committed"
    assert [c.status for c in outcome.compactions] == ["fenced"]
    assert _head(database, session.id) == outcome.turn_id
    with database.unit_of_work() as uow:
        ancestry = uow.ledger.threads.read_ancestry(outcome.turn_id)
    assert all(v.turn.turn_type == TurnType.NORMAL for v in ancestry)


def test_the_summary_model_writes_summaries_and_the_turn_model_answers(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    cheap = ScriptedModel()
    ports: dict[str, ModelPort] = {"scripted": rig.model, "cheap-summariser": cheap}
    rig.turns.model_for = ports.__getitem__
    rig.turns.summary_model = "cheap-summariser"
    session = rig.session()
    _talk(rig, session.id, 2)
    outcome = rig.say(session.id, "/compact")

    assert [c.status for c in outcome.compactions] == ["committed"]
    assert [r.purpose for r in rig.model.requests] == ["turn", "turn"]
    assert [(r.purpose, r.model) for r in cheap.requests] == [("summary", "cheap-summariser")]
    row = _compaction_row(database, outcome.turn_id)
    # The scripted port names itself in its answer; the row keeps what the summariser said.
    assert (row["provider"], row["model"]) == ("scripted", "scripted")


def test_an_unreachable_summary_model_still_compacts_with_a_digest(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)

    def model_for(name: str) -> ModelPort:
        if name == "claude-haiku-4-5":
            raise ModelUnavailable(f"model {name!r} needs ANTHROPIC_API_KEY")
        return rig.model

    rig.turns.model_for = model_for
    rig.turns.summary_model = "claude-haiku-4-5"
    session = rig.session()
    _talk(rig, session.id, 2)
    outcome = rig.say(session.id, "/compact")

    (compaction,) = outcome.compactions
    assert compaction.status == "committed" and compaction.fallback is True
    assert "INV-1" in (compaction.summary or "")
    row = _compaction_row(database, outcome.turn_id)
    assert row["metadata_json"]["fallback"] is True
    assert "ANTHROPIC_API_KEY" in row["metadata_json"]["error"]
    assert row["provider"] is None


def test_a_crash_in_the_asked_compaction_leaves_the_committed_turn_committed(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)

    def model_for(name: str) -> ModelPort:
        if name == "broken-summariser":
            raise RuntimeError("a bug in the summariser's wiring")
        return rig.model

    rig.turns.model_for = model_for
    rig.turns.summary_model = "broken-summariser"
    session = rig.session(capabilities=["compaction"])
    _talk(rig, session.id, 2)
    rig.model.push(CallTools(((COMPACT, {}),), text="Tidying."), Say("Done."))
    outcome = rig.say(session.id, "please compact")

    # The answer is on the chain and reported as such; only the compaction did not happen.
    assert outcome.status == "committed" and outcome.compactions == ()
    assert outcome.result is not None and outcome.result.status == TurnStatus.COMPLETED
    assert _head(database, session.id) == outcome.turn_id


def test_through_the_session_run_the_next_input_reads_the_summary(
    database: Database, clock: FakeClock
) -> None:
    """Queued inputs, the runner's lease and claims: the asking turn consumes its input, the
    compaction follows it in the same run, and the next input is answered after both."""
    rig = build_rig(database, clock)
    session = rig.session(capabilities=["compaction"])
    runner = SessionRunner(
        database=database,
        turns=rig.turns,
        coordination=InProcessCoordination(),
        doorbell=RecordingDoorbell(),
        clock=clock,
    )
    items = []
    with database.unit_of_work() as uow:
        for text in ("the folder is blue; compact afterwards", "which colour was it?"):
            clock.advance(1)
            event = EventDraft(
                id=f"api:{text}", adapter="api", platform="api", text=text, occurred_at=clock.now
            )
            uow.ledger.events.insert(event)
            item_id, _ = uow.ledger.queue.enqueue(
                NewQueueItem(session_id=session.id, event_id=f"api:{text}", mode=QueueMode.QUEUE)
            )
            items.append(item_id)
        uow.commit()
    rig.model.push(CallTools(((COMPACT, {"instructions": "colours"}),)), Say("Noted."))
    rig.model.push(Say("Blue."))
    report = runner.run(session.id)

    assert (report.status, report.turns, report.failed) == ("done", 2, 0)
    assert [r.purpose for r in rig.model.requests] == ["turn", "turn", "summary", "turn"]
    assert (
        rig.model.requests[-1]
        .messages[0]["content"][0]["text"]
        .startswith("[Previous conversation summary]")
    )
    head = _head(database, session.id)
    with database.unit_of_work() as uow:
        chain = uow.ledger.threads.read_ancestry(head or "")
        consumed = [uow.ledger.queue.get(item_id) for item_id in items]
    assert [v.turn.turn_type for v in chain] == [
        TurnType.NORMAL, TurnType.COMPACTION, TurnType.NORMAL,
    ]  # fmt: skip
    assert [i.consumed_by_turn_id if i else None for i in consumed] == [
        chain[0].turn.id,
        chain[2].turn.id,
    ]
