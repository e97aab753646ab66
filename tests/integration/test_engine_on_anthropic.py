"""A whole turn through the real anthropic SDK and a fake Messages API, on Postgres."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nexus.db import Database
from nexus.ledger.enums import MessageRole, ToolCallStatus, TurnStatus
from tests.contract.engine_support import RecordingTool, build_rig, on_anthropic
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    message_end,
    message_start,
    redacted_thinking_block,
    text_block,
    thinking_block,
    tool_use_block,
    with_ping,
)
from tests.support import FakeClock

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def test_a_two_tool_turn_commits_messages_calls_and_usage(
    pg_database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    weather = RecordingTool("get_weather", answer={"celsius": 18})
    rig = on_anthropic(
        build_rig(pg_database, clock, tools=[weather], granted=["get_weather", "current_time"]),
        fake.base_url,
        MODEL,
        max_retries=2,
    )
    session = rig.session(capabilities=["test_tools"])
    fake.reply_error(429, "rate_limit_error", "slow down")  # retried by the SDK
    fake.reply_tool_uses(
        [("get_weather", {"city": "Paris"}), ("current_time", {"timezone": "Europe/Paris"})],
        text="Let me look.",
        input_tokens=100,
        output_tokens=40,
    )
    fake.reply_text("18 °C in Paris right now.", input_tokens=180, output_tokens=12, cache_read=50)
    outcome = rig.say(session.id, "weather in Paris?")
    assert outcome.status == "committed"
    assert len(fake.requests) == 3  # the 429, the tool_use answer, the final answer
    with pg_database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None and view.turn.status == TurnStatus.COMPLETED
    assert [m.role for m in view.messages] == [
        MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL_CALL, MessageRole.TOOL_CALL,
        MessageRole.TOOL_RESULT, MessageRole.TOOL_RESULT, MessageRole.ASSISTANT,
    ]  # fmt: skip
    assert view.messages[-1].content["text"] == "18 °C in Paris right now."
    assert [(c.tool_name, c.status) for c in view.tool_calls] == [
        ("get_weather", ToolCallStatus.COMPLETED),
        ("current_time", ToolCallStatus.COMPLETED),
    ]
    assert weather.calls == [{"city": "Paris"}]
    turn = view.turn
    assert (turn.prompt_tokens, turn.completion_tokens, turn.cache_read_tokens) == (280, 52, 50)
    assert turn.context_tokens == 180 + 50 + 12
    assert turn.stop_reason == "end_turn" and turn.model == MODEL
    # The second call carried both tool results against the streamed tool_use ids.
    second = fake.requests[2].body["messages"]
    uses = [b["id"] for b in second[-2]["content"] if b["type"] == "tool_use"]
    assert [b["tool_use_id"] for b in second[-1]["content"]] == uses


def test_a_mid_stream_overload_fails_the_turn_and_keeps_the_partial_text(
    pg_database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    rig = on_anthropic(build_rig(pg_database, clock), fake.base_url, MODEL, max_retries=2)
    session = rig.session()
    fake.reply_stream_error("The answer begins")
    outcome = rig.say(session.id, "explain")
    assert outcome.status == "failed"
    with pg_database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
        after = uow.ledger.sessions.get(session.id)
    assert view is not None and after is not None
    assert view.turn.status == TurnStatus.FAILED and view.turn.error_kind == "model_error"
    assert view.messages[-1].content == {"text": "The answer begins", "partial": True}
    assert after.thread_id is None  # off the chain: the session did not move
    assert "step.error" in rig.publisher.types(session.id)


def test_a_thinking_tool_loop_sends_the_signed_thinking_back_unchanged(
    pg_database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    weather = RecordingTool("get_weather", answer={"celsius": 18})
    rig = on_anthropic(
        build_rig(pg_database, clock, tools=[weather], granted=["get_weather"]),
        fake.base_url,
        MODEL,
        max_retries=2,
    )
    session = rig.session(capabilities=["test_tools"])
    with pg_database.unit_of_work() as uow:
        uow.ledger.sessions.configure(
            session.id,
            {"model_overrides": {"thinking": {"type": "enabled", "budget_tokens": 2048}}},
        )
        uow.commit()
    fake.reply_events(with_ping([message_start(), *thinking_block(0, "Look it up.", "sig_A"),
                                 *redacted_thinking_block(1, "Opaque=="),
                                 *tool_use_block(2, "toolu_w1", "get_weather", '{"city": "Paris"}'),
                                 *message_end("tool_use", 20)]))  # fmt: skip
    answer_events = [*thinking_block(0, "18 it is.", "sig_B"), *text_block(1, "18 °C.")]
    fake.reply_events(with_ping([message_start(), *answer_events, *message_end("end_turn", 9)]))
    outcome = rig.say(session.id, "weather in Paris?")
    assert outcome.status == "committed"
    first, second = (received.body for received in fake.requests)
    for body in (first, second):
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert body["max_tokens"] == 2048 + rig.turns.max_tokens
    signed = {"type": "thinking", "thinking": "Look it up.", "signature": "sig_A"}
    redacted = {"type": "redacted_thinking", "data": "Opaque=="}
    answer = second["messages"][-2]
    assert answer["role"] == "assistant"
    assert answer["content"][:2] == [signed, redacted]
    assert answer["content"][2]["type"] == "tool_use" and answer["content"][2]["id"] == "toolu_w1"
    assert second["messages"][-1]["content"][0]["tool_use_id"] == "toolu_w1"
    # The next turn rebuilds the same blocks from the ledger, in the same places.
    fake.reply_text("You are welcome.")
    rig.say(session.id, "thanks")
    replay = fake.requests[2].body["messages"]
    assert replay[1]["content"][:2] == [signed, redacted]
    assert replay[3]["content"][0] == {
        "type": "thinking",
        "thinking": "18 it is.",
        "signature": "sig_B",
    }
    assert replay[3]["content"][1]["text"] == "18 °C."  # with the history's cache breakpoint
