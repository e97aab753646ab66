"""Prompt caching through the real anthropic SDK: where the breakpoints go, and that a
second turn reads the first turn's prefix from the (fake, honestly accounted) cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nexus.adapters.anthropic.model import AnthropicModel
from nexus.db import Database
from nexus.engine.model import ModelDone, ModelRequest
from tests.contract.engine_support import RecordingTool, build_rig, on_anthropic
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.support import FakeClock

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def fake() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


def _marked(body: dict[str, Any]) -> list[str]:
    """Where the request's breakpoints are: system:N or role:message:block."""
    where = [f"system:{i}" for i, b in enumerate(body["system"]) if "cache_control" in b]
    for m, message in enumerate(body["messages"]):
        for b, block in enumerate(message["content"]):
            if "cache_control" in block:
                where.append(f"{message['role']}:{m}:{b}")
    return where


def test_the_second_turn_reads_the_first_turns_prefix_from_the_cache(
    pg_database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    rig = on_anthropic(build_rig(pg_database, clock), fake.base_url, MODEL)
    session = rig.session()
    fake.reply_text("Lisbon, in May.")
    first = rig.say(
        session.id,
        "where should we go?",
        platform="telegram",
        sender_name="Ada",
        occurred_at=1_700_000_000_000,
    )
    fake.reply_text("Three nights.")
    second = rig.say(
        session.id,
        "for how long?",
        platform="telegram",
        sender_name="Ada",
        occurred_at=1_700_000_000_000,
    )
    assert first.status == second.status == "committed"

    one, two = (request.body for request in fake.requests)
    assert isinstance(one["system"], list) and one["system"][0]["text"].startswith("You are")
    last_system = len(one["system"]) - 1
    # The first turn: after the stable layers, and the conversation's tail (no history yet).
    assert _marked(one) == [f"system:{last_system}", "user:0:1"]
    # The second: the same, plus the end of history (the first answer).
    assert _marked(two) == [f"system:{last_system}", "assistant:1:0", "user:2:1"]
    assert two["system"] == one["system"]  # the stable layers did not change

    written, read = fake.cache_accounts
    assert (written.cache_read, written.cache_write) == (0, written.cache_write)
    assert written.cache_write > 0
    # Everything the first turn sent, up to its question, is read back on the second.
    assert read.cache_read == written.cache_write
    with pg_database.unit_of_work() as uow:
        turns = [uow.ledger.threads.get_turn(o.turn_id) for o in (first, second)]
    assert turns[0] is not None and turns[1] is not None
    assert turns[1].turn.cache_read_tokens == read.cache_read > 0
    assert turns[1].turn.cache_write_tokens == read.cache_write > 0
    assert turns[0].turn.cache_read_tokens == 0


def test_a_tool_loop_reads_the_previous_call_from_the_cache(
    pg_database: Database, clock: FakeClock, fake: FakeAnthropicServer
) -> None:
    weather = RecordingTool("get_weather", answer={"celsius": 18})
    rig = on_anthropic(
        build_rig(pg_database, clock, tools=[weather], granted=["get_weather"]),
        fake.base_url,
        MODEL,
    )
    session = rig.session(capabilities=["test_tools"])
    fake.reply_tool_use("get_weather", {"city": "Lisbon"})
    fake.reply_text("18 °C.")
    assert rig.say(session.id, "weather in Lisbon?").status == "committed"
    call, answer = fake.cache_accounts
    assert answer.cache_read == call.cache_write > 0  # the question's prefix, as sent before
    assert _marked(fake.requests[1].body)[-1] == "user:2:0"  # the tool result is the new tail


def test_a_plain_system_text_asks_for_no_caching(fake: FakeAnthropicServer) -> None:
    fake.reply_text("hi")
    model = AnthropicModel(api_key="sk-test", base_url=fake.base_url, max_retries=0)
    request = ModelRequest(
        model=MODEL,
        system="Answer briefly.",
        messages=({"role": "user", "content": [{"type": "text", "text": "hello"}]},),
    )
    done = list(model.stream(request))[-1]
    assert isinstance(done, ModelDone)
    body = fake.requests[0].body
    assert body["system"] == "Answer briefly."
    assert "cache_control" not in str(body["messages"])
    assert (done.usage.cache_read_tokens, done.usage.cache_write_tokens) == (0, 0)
    assert done.usage.input_tokens == fake.cache_accounts[0].input_tokens > 0
