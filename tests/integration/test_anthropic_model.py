"""The real anthropic SDK against a loopback fake Messages API: streams, tools, errors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace

import anthropic
import pytest

from nexus.adapters.anthropic.model import AnthropicModel
from nexus.engine.model import (
    ModelDone,
    ModelError,
    ModelRequest,
    ModelStreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolSpec,
    ToolUseStarted,
)
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

WEATHER = ToolSpec(
    "get_weather",
    "Weather by city",
    {"type": "object", "properties": {"location": {"type": "string"}}},
)
REQUEST = ModelRequest(
    model="claude-sonnet-4-6",
    system="You are terse.",
    messages=({"role": "user", "content": [{"type": "text", "text": "hi"}]},),
    tools=(WEATHER,),
    max_tokens=256,
)


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def _model(
    fake: FakeAnthropicServer, *, max_retries: int = 2, timeout_s: float = 5.0
) -> AnthropicModel:
    return AnthropicModel(
        api_key="sk-test", base_url=fake.base_url, max_retries=max_retries, timeout_s=timeout_s
    )


def _collect(model: AnthropicModel, request: ModelRequest = REQUEST) -> list[ModelStreamEvent]:
    return list(model.stream(request))


def _done(events: list[ModelStreamEvent]) -> ModelDone:
    assert isinstance(events[-1], ModelDone)
    assert not any(isinstance(e, ModelDone) for e in events[:-1])
    return events[-1]


def _error(model: AnthropicModel) -> ModelError:
    with pytest.raises(ModelError) as raised:
        _collect(model)
    return raised.value


# -- answers ---------------------------------------------------------------------------------


def test_text_streams_in_order_and_ends_with_usage(fake: FakeAnthropicServer) -> None:
    fake.reply_text("Hello from the fake.", input_tokens=30, output_tokens=7, cache_read=11,
                    cache_write=5, chunks=4)  # fmt: skip
    events = _collect(_model(fake))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 4 and "".join(deltas) == "Hello from the fake."
    done = _done(events)
    assert done.content == ({"type": "text", "text": "Hello from the fake."},)
    assert done.stop_reason == "end_turn" and done.model == fake.model
    usage = done.usage
    assert (usage.input_tokens, usage.output_tokens) == (30, 7)  # output from message_delta
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (11, 5)


def test_the_request_carries_what_the_engine_sent(fake: FakeAnthropicServer) -> None:
    fake.reply_text("ok")
    fake.reply_text("ok")
    model = _model(fake)
    _collect(model, replace(REQUEST, temperature=0.2))
    _collect(model, ModelRequest(model="claude-haiku-4-5", system="", messages=REQUEST.messages))
    first, second = (r.body for r in fake.requests)
    assert first == {
        "model": "claude-sonnet-4-6",
        "system": "You are terse.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather by city",
                "input_schema": WEATHER.input_schema,
            }
        ],
        "max_tokens": 256,
        "temperature": 0.2,
        "stream": True,
    }
    assert "tools" not in second and "temperature" not in second
    headers = fake.requests[0].headers
    assert "sk-test" in (headers.get("x-api-key"), headers.get("authorization", "")[7:])


def test_a_tool_use_streams_its_input_and_is_parsed(fake: FakeAnthropicServer) -> None:
    fake.reply_tool_use("get_weather", {"location": "Paris"}, text="Checking.", tool_id="toolu_1")
    events = _collect(_model(fake))
    assert ToolUseStarted(id="toolu_1", name="get_weather", index=1) in events
    pieces = [e.partial_json for e in events if isinstance(e, ToolInputDelta)]
    assert len([p for p in pieces if p]) >= 2
    assert json.loads("".join(pieces)) == {"location": "Paris"}
    done = _done(events)
    assert done.stop_reason == "tool_use" and done.text == "Checking."
    assert done.tool_uses == (
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "get_weather",
            "input": {"location": "Paris"},
        },
    )


def test_two_tool_uses_in_one_answer(fake: FakeAnthropicServer) -> None:
    first, second = fake.reply_tool_uses(
        [("get_weather", {"location": "Paris"}), ("get_weather", {"location": "Oslo"})]
    )
    events = _collect(_model(fake))
    assert [e.id for e in events if isinstance(e, ToolUseStarted)] == [first, second]
    done = _done(events)
    assert [u["id"] for u in done.tool_uses] == [first, second]
    assert [u["input"] for u in done.tool_uses] == [{"location": "Paris"}, {"location": "Oslo"}]


def test_thinking_blocks_are_kept_as_they_came(fake: FakeAnthropicServer) -> None:
    fake.reply_events(with_ping([message_start(), *thinking_block(0, "Hmm.", "sig_1"),
                                 *text_block(1, "Yes."), *message_end("end_turn", 9)]))  # fmt: skip
    done = _done(_collect(_model(fake)))
    assert done.content == (
        {"type": "thinking", "thinking": "Hmm.", "signature": "sig_1"},
        {"type": "text", "text": "Yes."},
    )


def test_thinking_is_asked_for_streamed_and_redacted_thinking_kept(
    fake: FakeAnthropicServer,
) -> None:
    fake.reply_events(with_ping([message_start(), *thinking_block(0, "Let me see.", "sig_2"),
                                 *redacted_thinking_block(1, "EncryptedBlob=="),
                                 *text_block(2, "Yes."), *message_end("end_turn", 9)]))  # fmt: skip
    events = _collect(_model(fake), replace(REQUEST, thinking=1024, max_tokens=2048))
    body = fake.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 2048 and "temperature" not in body
    assert [e.text for e in events if isinstance(e, ThinkingDelta)] == ["Let me see."]
    assert _done(events).content == (
        {"type": "thinking", "thinking": "Let me see.", "signature": "sig_2"},
        {"type": "redacted_thinking", "data": "EncryptedBlob=="},
        {"type": "text", "text": "Yes."},
    )


def test_no_thinking_param_without_a_budget(fake: FakeAnthropicServer) -> None:
    fake.reply_text("Fine.")
    _collect(_model(fake), replace(REQUEST, temperature=0.3))
    body = fake.requests[0].body
    assert "thinking" not in body and body["temperature"] == 0.3


def test_a_cut_off_tool_input_is_dropped_at_max_tokens(fake: FakeAnthropicServer) -> None:
    truncated = tool_use_block(1, "toolu_cut", "make_file", '{"filename": "taxes.txt", "li')
    fake.reply_events([message_start(), *text_block(0, "Writing it."), *truncated[:-1],
                       *message_end("max_tokens", 124)])  # fmt: skip
    done = _done(_collect(_model(fake)))
    assert done.stop_reason == "max_tokens"
    assert done.content == ({"type": "text", "text": "Writing it."},)


def test_a_refusal_keeps_no_empty_text_block(fake: FakeAnthropicServer) -> None:
    fake.reply_events([message_start(), *text_block(0, ""), *message_end("refusal", 0)])
    done = _done(_collect(_model(fake)))
    assert (done.stop_reason, done.content) == ("refusal", ())


# -- failures --------------------------------------------------------------------------------


def test_a_429_is_retried_by_the_sdk(fake: FakeAnthropicServer) -> None:
    fake.reply_error(429, "rate_limit_error", "slow down")
    fake.reply_text("after the wait")
    done = _done(_collect(_model(fake, max_retries=2)))
    assert done.text == "after the wait"
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]


def test_an_auth_failure_is_not_retried(fake: FakeAnthropicServer) -> None:
    fake.reply_error(401, "authentication_error", "invalid x-api-key")
    error = _error(_model(fake, max_retries=3))
    assert (error.kind, error.retryable, error.status_code) == ("auth_failure", False, 401)
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("status", "error_type", "message", "kind", "retryable"),
    [
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum",
         "context_overflow", False),
        (400, "invalid_request_error", "messages.0: unexpected `tool_use_id`", "unknown", False),
        (403, "permission_error", "not allowed", "auth_failure", False),
        (429, "rate_limit_error", "slow down", "rate_limit", True),
        (500, "api_error", "Internal server error", "model_error", True),
        (529, "overloaded_error", "Overloaded", "model_error", True),
    ],
)  # fmt: skip
def test_http_errors_map_to_kinds(
    fake: FakeAnthropicServer, status: int, error_type: str, message: str, kind: str,
    retryable: bool,
) -> None:  # fmt: skip
    fake.reply_error(status, error_type, message)
    error = _error(_model(fake, max_retries=0))
    assert (error.kind, error.retryable, error.status_code) == (kind, retryable, status)
    assert message in error.message
    assert len(fake.requests) == 1


def test_a_mid_stream_error_comes_after_the_partial_text(fake: FakeAnthropicServer) -> None:
    fake.reply_stream_error("Half an answ")
    seen: list[ModelStreamEvent] = []
    with pytest.raises(ModelError) as raised:
        seen.extend(_model(fake).stream(REQUEST))  # extend keeps what came before the raise
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "Half an answ"
    assert not any(isinstance(e, ModelDone) for e in seen)
    assert (raised.value.kind, raised.value.retryable) == ("model_error", True)
    assert len(fake.requests) == 1  # a stream that started is never retried by the SDK


def test_a_stream_cut_before_message_stop_is_a_retryable_error(fake: FakeAnthropicServer) -> None:
    fake.reply_events([message_start(), *text_block(0, "and then")])
    error = _error(_model(fake))
    assert (error.kind, error.retryable) == ("model_error", True)


def test_a_silent_server_times_out(fake: FakeAnthropicServer) -> None:
    fake.reply_hang(3.0)
    started = time.monotonic()
    error = _error(_model(fake, timeout_s=0.5, max_retries=0))
    assert (error.kind, error.retryable) == ("timeout", True)
    assert time.monotonic() - started < 1.5


def test_a_stream_that_stalls_times_out(fake: FakeAnthropicServer) -> None:
    fake.reply_text("slow", delay_s=1.0)
    started = time.monotonic()
    error = _error(_model(fake, timeout_s=0.3, max_retries=0))
    assert (error.kind, error.retryable) == ("timeout", True)
    assert time.monotonic() - started < 1.0


def test_an_unscripted_request_fails_loudly_once(fake: FakeAnthropicServer) -> None:
    error = _error(_model(fake, max_retries=2))
    assert "no answer scripted for request #1" in error.message
    assert len(fake.requests) == 1


def test_closing_the_stream_early_hangs_up(fake: FakeAnthropicServer) -> None:
    fake.reply_text("one two three four five six", chunks=6, delay_s=0.1)
    stream = _model(fake).stream(REQUEST)
    first = next(e for e in stream if isinstance(e, TextDelta))
    started = time.monotonic()
    stream.close()
    assert first.text and time.monotonic() - started < 0.2
    assert fake.wait_for_disconnect(timeout_s=1.0)


# -- the fake's other routes -----------------------------------------------------------------


def test_the_fake_answers_whole_messages_and_token_counts(fake: FakeAnthropicServer) -> None:
    fake.reply_tool_use("get_weather", {"location": "Oslo"}, text="One moment.", tool_id="toolu_9")
    client = anthropic.Anthropic(api_key="sk-test", base_url=fake.base_url, max_retries=0)
    message = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.stop_reason == "tool_use" and message.usage.output_tokens == 30
    assert [block.type for block in message.content] == ["text", "tool_use"]
    assert message.content[1].model_dump()["input"] == {"location": "Oslo"}
    counted = client.messages.count_tokens(
        model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}]
    )
    assert counted.input_tokens > 0
    assert len(fake.requests) == 1 and len(fake.token_counts) == 1
