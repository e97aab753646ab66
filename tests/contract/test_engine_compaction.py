"""Compaction, forking and routing through the engine, on both databases."""

from __future__ import annotations

from nexus.adapters.scripted import Fail, Say
from nexus.arrival.route import RouteTarget, route
from nexus.db import Database
from nexus.engine.context import SUMMARY_HEADER
from nexus.engine.model import ModelError
from nexus.ledger.enums import CompactionTrigger, TurnType
from tests.contract.engine_support import build_rig
from tests.support import FakeClock

SMALL_WINDOW = 2_000


def test_a_long_session_compacts_itself_and_keeps_every_turn(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock, window=SMALL_WINDOW)
    session = rig.session()
    for number in range(40):
        rig.model.push(Say(f"answer {number}"))
        outcome = rig.say(session.id, f"question number {number} " + "words " * 10)
        assert outcome.status == "committed"
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
        assert head is not None
        ancestry = uow.ledger.threads.read_ancestry(head.thread_id or "")
        context = uow.ledger.threads.read_context(head.thread_id)
    normal = [v for v in ancestry if v.turn.turn_type == TurnType.NORMAL]
    compactions = [v for v in ancestry if v.turn.turn_type == TurnType.COMPACTION]
    assert len(normal) == 40  # nothing was deleted
    assert compactions, "a 40-turn session in a 2,000-token window must compact"
    assert context.compaction is not None
    assert context.compaction.trigger == CompactionTrigger.PROACTIVE
    assert 0 < len(context.turns) < 40
    summaries = [r for r in rig.model.requests if r.purpose == "summary"]
    assert len(summaries) == len(compactions)
    # Later summaries are recursive: they are given the previous summary to carry over.
    if len(summaries) > 1:
        assert SUMMARY_HEADER in summaries[-1].messages[0]["content"][0]["text"]
    # The next request holds the summary first, then only the kept turns.
    rig.model.push(Say("ok"))
    rig.say(session.id, "and now?")
    request = rig.model.requests[-1]
    assert request.messages[0]["content"][0]["text"].startswith(SUMMARY_HEADER)
    # Exactly the turns the context read keeps after the summary: no older answer comes back.
    with database.unit_of_work() as uow:
        last = uow.ledger.sessions.get(session.id)
        assert last is not None and last.thread_id is not None
        final = uow.ledger.threads.get_turn(last.thread_id)
        assert final is not None and final.turn.parent_turn_id is not None
        kept = uow.ledger.threads.read_context(final.turn.parent_turn_id)
    expected = [
        m.content["text"]
        for view in kept.turns
        if view.turn.turn_type == TurnType.NORMAL
        for m in view.messages
        if m.role.value == "assistant"
    ]
    replayed = [
        block["text"]
        for m in request.messages
        if m["role"] == "assistant"
        for block in m["content"]
        if block.get("type") == "text"
    ]
    assert replayed == expected and 0 < len(replayed) < 40


def test_manual_compact_passes_its_instructions_to_the_summariser(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    for number in range(3):
        rig.say(session.id, f"we talked about invoices {number}")
    outcome = rig.say(session.id, "/compact focus on X")
    assert outcome.status == "committed" and outcome.compactions
    summary_request = rig.model.requests[-1]
    assert summary_request.purpose == "summary"
    assert "focus on X" in summary_request.system
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
        assert head is not None
        context = uow.ledger.threads.read_context(head.thread_id)
    assert context.compaction is not None
    assert context.compaction.trigger == CompactionTrigger.MANUAL
    assert context.compaction.instructions == "focus on X"
    assert context.compaction.turns_summarized == 3
    assert context.turns == ()


def test_a_failing_summariser_still_compacts_with_a_digest(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    rig.say(session.id, "remember the blue folder")
    rig.model.push(Fail(ModelError("model_error", "down", retryable=True)))
    outcome = rig.say(session.id, "/compact")
    assert outcome.compactions[0].fallback is True
    assert "remember the blue folder" in (outcome.compactions[0].summary or "")
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
        assert head is not None and head.thread_id == outcome.turn_id


def test_a_context_overflow_compacts_hard_and_retries_once(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    for number in range(4):
        rig.say(session.id, f"turn {number}")
    overflow = ModelError("context_overflow", "prompt is too long")
    rig.model.push(Fail(overflow), Say("a summary"), Say("answered after compaction"))
    outcome = rig.say(session.id, "one more")
    assert outcome.status == "committed"
    assert [c.status for c in outcome.compactions] == ["committed"]
    with database.unit_of_work() as uow:
        context = uow.ledger.threads.read_context(outcome.turn_id)
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert context.compaction is not None
    assert context.compaction.trigger == CompactionTrigger.OVERFLOW
    assert view is not None and view.messages[-1].content["text"] == "answered after compaction"


def test_forking_turn_10_of_20_continues_from_it_in_a_new_session(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    turn_ids = [rig.say(session.id, f"step {n}").turn_id for n in range(20)]
    with database.unit_of_work() as uow:
        routed = route(uow.ledger, RouteTarget("thread", turn_ids[9]))
        uow.commit()
    assert routed.how == "fork" and routed.session.id != session.id
    outcome = rig.say(routed.session.id, "what if we went another way?")
    with database.unit_of_work() as uow:
        child = uow.ledger.threads.get_turn(outcome.turn_id)
        original = uow.ledger.sessions.get(session.id)
        fork_history = uow.ledger.threads.read_ancestry(outcome.turn_id)
    assert child is not None and child.turn.parent_turn_id == turn_ids[9]
    assert child.turn.session_id == routed.session.id
    assert original is not None and original.thread_id == turn_ids[19]
    assert len(fork_history) == 11
    # The forked turn's context is turns 1..10 of the original, then the new query.
    assert len([m for m in rig.model.requests[-1].messages if m["role"] == "assistant"]) == 10


def test_routing_to_a_head_continues_that_session(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    head = rig.say(session.id, "hi").turn_id
    with database.unit_of_work() as uow:
        assert route(uow.ledger, RouteTarget("thread", head)).session.id == session.id
        assert route(uow.ledger, RouteTarget("session", session.label)).session.id == session.id
        persona = route(uow.ledger, RouteTarget("persona", "assistant"))
        uow.commit()
    assert persona.how == "created" and persona.session.label == "system:persona:assistant"


def test_smart_routing_finds_the_thread_that_discussed_it(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    billing = rig.session("dm:ent_billing")
    weather = rig.session("dm:ent_weather")
    rig.model.push(Say("I sent the invoice for ACME Corp yesterday."))
    rig.say(billing.id, "did the ACME invoice go out?")
    rig.model.push(Say("Sunny with light wind."))
    rig.say(weather.id, "what's the forecast for tomorrow?")
    with database.unit_of_work() as uow:
        smart = route(
            uow.ledger,
            RouteTarget("session", weather.label, smart=True),
            text="the invoice for ACME",
        )
        fallback = route(
            uow.ledger,
            RouteTarget("session", weather.label, smart=True),
            text="quantum chromodynamics",
        )
    assert smart.how == "smart" and smart.session.id == billing.id
    assert fallback.how == "label" and fallback.session.id == weather.id


def test_the_offline_model_summarises_what_the_turns_said(
    database: Database, clock: FakeClock
) -> None:
    """`nexus dev` answers with the scripted model: its summary is a digest of the turns it
    replaces (not the summariser's section header), and a later one carries it forward."""
    rig = build_rig(database, clock)  # nothing scripted: the model answers as in `nexus dev`
    session = rig.session()
    rig.say(session.id, "the invoice is due Friday\nand it is large")
    rig.say(session.id, "ACME owes 300")
    first = rig.say(session.id, "/compact").compactions[0]
    assert first.fallback is False
    summary = first.summary or ""
    headline = summary.splitlines()[0]
    assert "the invoice is due Friday" in headline and "ACME owes 300" in headline
    assert "- user: the invoice is due Friday" in summary
    assert "and it is large" not in summary  # first lines only: a digest, not a copy
    assert "- assistant: " in summary and "[Conversation to summarise]" not in summary
    rig.say(session.id, "remind me Thursday")
    second = rig.say(session.id, "/compact").compactions[0]
    assert "remind me Thursday" in (second.summary or "").splitlines()[0]
    assert "ACME owes 300" in (second.summary or "")  # the previous summary carried over
    # Deterministic: the same turns give the same summary.
    again = build_rig(database, clock)
    other = again.session("dm:ent_again")
    again.say(other.id, "the invoice is due Friday\nand it is large")
    again.say(other.id, "ACME owes 300")
    assert again.say(other.id, "/compact").compactions[0].summary == summary
