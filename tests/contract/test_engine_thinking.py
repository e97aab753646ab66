"""The engine's model configuration (persona, session, turn) and extended thinking kept."""

from __future__ import annotations

from typing import Any

from nexus.adapters.scripted import CallTools, Say, signed
from nexus.db import Database
from nexus.ledger.enums import MessageRole, TurnStatus
from nexus.ledger.records import SessionRecord
from tests.contract.engine_support import RecordingTool, Rig, build_rig
from tests.support import FakeClock

THINKING = {"type": "enabled", "budget_tokens": 2048}


def _configure(
    rig: Rig,
    session: SessionRecord,
    *,
    persona: dict[str, Any] | None = None,
    own: dict[str, Any] | None = None,
) -> None:
    with rig.database.unit_of_work() as uow:
        if persona is not None:
            uow.ledger.agents.update_fields(session.persona_id, {"default_model_config": persona})
        if own is not None:
            uow.ledger.sessions.configure(session.id, {"model_overrides": own})
        uow.commit()


def test_thinking_in_a_tool_loop_is_streamed_stored_and_sent_back_signed(
    database: Database, clock: FakeClock
) -> None:
    lookup = RecordingTool("lookup", answer={"found": 3})
    rig = build_rig(database, clock, tools=[lookup], granted=["lookup"])
    session = rig.session(capabilities=["test_tools"])
    _configure(rig, session, persona={"thinking": THINKING})
    rig.model.push(
        CallTools((("lookup", {"q": "x"}),), thinking="I should look it up."),
        Say("There are 3.", thinking="The tool found 3."),
    )
    outcome = rig.say(session.id, "how many?")
    assert outcome.status == "committed"
    looked = {
        "type": "thinking",
        "thinking": "I should look it up.",
        "signature": signed("I should look it up."),
    }
    found = {
        "type": "thinking",
        "thinking": "The tool found 3.",
        "signature": signed("The tool found 3."),
    }
    # The tool loop's second call carries the first call's signed thinking, unchanged,
    # before its tool_use, and both calls asked for thinking.
    first, second = rig.model.requests
    assert first.thinking == second.thinking == 2048
    answer = second.messages[-2]
    assert answer["role"] == "assistant"
    assert [b["type"] for b in answer["content"]] == ["thinking", "tool_use"]
    assert answer["content"][0] == looked
    # The ledger keeps each call's thinking on its first message.
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None
    call = next(m for m in view.messages if m.role == MessageRole.TOOL_CALL)
    reply = next(m for m in view.messages if m.role == MessageRole.ASSISTANT)
    assert call.content["thinking"] == [looked]
    assert reply.content == {"text": "There are 3.", "thinking": [found]}
    # Watchers saw the thinking as it streamed.
    thought = "".join(
        data["text"] for _, kind, data in rig.publisher.events if kind == "step.thinking"
    )
    assert thought == "I should look it up.The tool found 3."
    # The next turn replays the stored thinking before the tool_use and before the text.
    rig.say(session.id, "and now?")
    replay = rig.model.requests[-1].messages
    assert [m["role"] for m in replay] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in replay[1]["content"]] == ["thinking", "tool_use"]
    assert replay[1]["content"][0] == looked
    assert replay[3]["content"][0] == found
    # (The history's last block carries the prompt cache breakpoint; thinking never does.)
    assert replay[3]["content"][1]["text"] == "There are 3."


def test_each_field_comes_from_the_turn_the_session_or_the_persona(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    _configure(
        rig,
        session,
        persona={"model": "claude-persona", "max_tokens": 3000, "temperature": 0.7},
        own={"model": "claude-session"},
    )
    rig.say(session.id, "short, please", model_overrides={"max_tokens": 1500})
    rig.say(session.id, "and again")
    once, after = rig.model.requests
    assert (once.model, once.max_tokens, once.temperature, once.thinking) == (
        "claude-session",
        1500,
        0.7,
        None,
    )
    # The turn's override was the turn's alone.
    assert (after.model, after.max_tokens) == ("claude-session", 3000)


def test_a_turn_switches_off_the_personas_thinking(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    _configure(rig, session, persona={"thinking": THINKING})
    rig.say(session.id, "quick one", model_overrides={"thinking": {"type": "disabled"}})
    rig.say(session.id, "think now")
    assert [r.thinking for r in rig.model.requests] == [None, 2048]


def test_the_turn_records_what_it_ran_with_and_where_each_field_came_from(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    _configure(rig, session, persona={"max_tokens": 9000}, own={"model": "claude-session"})
    outcome = rig.say(session.id, "think hard", model_overrides={"thinking": THINKING})
    request = rig.model.requests[-1]
    assert (request.model, request.thinking, request.max_tokens) == ("claude-session", 2048, 9000)
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None
    assert view.turn.model == "claude-session"
    assert view.turn.model_settings == {
        "model": "claude-session",
        "thinking": THINKING,
        "max_tokens": 9000,
        "sources": {
            "model": "session",
            "thinking": "turn",
            "max_tokens": "persona",
            "temperature": "default",
        },
    }
    # The next turn, without an override, does not think.
    rig.say(session.id, "and quickly")
    assert rig.model.requests[-1].thinking is None


def test_layers_that_no_longer_fit_fail_the_turn_with_the_reason_and_call_no_model(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    # Each layer was fine when written; the persona changed under the session since.
    _configure(rig, session, persona={"temperature": 0.5}, own={"thinking": THINKING})
    outcome = rig.say(session.id, "hello")
    assert outcome.result is not None and outcome.result.status == TurnStatus.FAILED
    assert not rig.model.requests
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
        head = uow.ledger.sessions.get(session.id)
    assert view is not None and head is not None
    assert view.turn.status == TurnStatus.FAILED and head.thread_id is None
    assert view.turn.error_message is not None
    assert "temperature (from the persona)" in view.turn.error_message
    assert "thinking (from the session)" in view.turn.error_message
