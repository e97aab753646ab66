"""The engine end to end on the ledger: turns, tools, permissions, abort and steer."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Sequence

from nexus.adapters.scripted import SCRIPTED_NOTICE, CallTools, Fail, Say, ScriptStep
from nexus.db import Database
from nexus.engine.model import ModelError, ModelRequest
from nexus.engine.query import QueryMessage
from nexus.engine.stream import RecordingPublisher
from nexus.engine.stream_events import StreamEvent
from nexus.ledger.enums import MessageRole, ToolCallStatus, TurnStatus
from tests.contract.engine_support import RecordingTool, build_rig
from tests.support import FakeClock


def test_a_plain_turn_records_the_query_with_its_event_context(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    outcome = rig.say(
        session.id, "hello there", platform="telegram", sender_name="Ada", occurred_at=clock.now
    )
    assert outcome.status == "committed"
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
        head = uow.ledger.sessions.get(session.id)
    assert view is not None and head is not None and head.thread_id == outcome.turn_id
    roles = [m.role for m in view.messages]
    assert roles == [MessageRole.USER, MessageRole.ASSISTANT]
    assert view.messages[0].content["context"]["platform"] == "telegram"
    assert view.messages[0].content["context"]["sender"] == "Ada"
    assert view.messages[1].content["text"].startswith(SCRIPTED_NOTICE)
    # The model saw the event context before the text, and the persona's identity.
    request = rig.model.requests[0]
    assert request.system_text.startswith("You are assistant.")
    first_blocks = request.messages[-1]["content"]
    assert "platform: telegram" in first_blocks[0]["text"]
    assert first_blocks[-1]["text"] == "hello there"
    assert view.turn.context_tokens is not None and view.turn.context_tokens > 0


def test_history_is_replayed_on_the_next_turn(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    rig.model.push(Say("Noted: your name is Ada."))
    rig.say(session.id, "my name is Ada")
    rig.say(session.id, "what is my name?")
    replay = rig.model.requests[1].messages
    assert [m["role"] for m in replay] == ["user", "assistant", "user"]
    assert replay[1]["content"][0]["text"] == "Noted: your name is Ada."


def test_a_two_tool_turn_commits_calls_results_and_summed_usage(
    database: Database, clock: FakeClock
) -> None:
    lookup = RecordingTool("lookup", answer={"found": 3})
    rig = build_rig(database, clock, tools=[lookup], granted=["lookup", "current_time"])
    session = rig.session(capabilities=["test_tools"])
    rig.model.push(
        CallTools((("lookup", {"q": "x"}), ("current_time", {})), text="Let me check."),
        Say("There are 3."),
    )
    outcome = rig.say(session.id, "how many?")
    assert outcome.status == "committed" and outcome.result is not None
    assert outcome.result.model_calls == 2
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None
    assert [m.role.value for m in view.messages] == [
        "user",
        "assistant",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
        "assistant",
    ]
    assert [c.tool_name for c in view.tool_calls] == ["lookup", "current_time"]
    assert all(c.status == ToolCallStatus.COMPLETED for c in view.tool_calls)
    assert view.tool_calls[0].result == {"found": 3}
    assert lookup.calls == [{"q": "x"}]
    assert view.turn.prompt_tokens == sum(_estimate(request) for request in rig.model.requests)
    # The second call saw both results, each answering its own tool_use id.
    results = rig.model.requests[1].messages[-1]["content"]
    uses = rig.model.requests[1].messages[-2]["content"]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses if u["type"] == "tool_use"]
    assert rig.publisher.types(session.id).count("tool.completed") == 2


def _estimate(request: ModelRequest) -> int:
    import json

    said = sum(len(json.dumps(m)) for m in request.messages)
    return max(1, (len(request.system_text) + said) // 4)


def test_a_denied_tool_never_runs_and_the_model_sees_why(
    database: Database, clock: FakeClock
) -> None:
    delete = RecordingTool("files.delete")
    read = RecordingTool("files.read", answer="contents")
    rig = build_rig(database, clock, tools=[delete, read], granted=["files.delete", "files.read"])
    permissions = {"tools": {"allow": ["files.*"], "deny": ["files.delete"]}}
    session = rig.session(permissions=permissions, capabilities=["test_tools"])
    rig.model.push(CallTools((("files.delete", {"path": "/"}), ("files.read", {}))), Say("ok"))
    outcome = rig.say(session.id, "clean up")
    assert outcome.status == "committed"
    assert delete.calls == [] and read.calls == [{}]
    offered = [tool.name for tool in rig.model.requests[0].tools]
    assert "files.delete" not in offered and "files.read" in offered
    results = rig.model.requests[1].messages[-1]["content"]
    assert results[0]["is_error"] is True and "den" in results[0]["content"]
    assert results[1]["is_error"] is False
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None
    assert [c.status for c in view.tool_calls] == [ToolCallStatus.FAILED, ToolCallStatus.COMPLETED]


def test_an_unknown_tool_is_an_error_result_and_the_turn_goes_on(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    rig.model.push(CallTools((("no_such_tool", {}),)), Say("sorry"))
    outcome = rig.say(session.id, "do it")
    assert outcome.status == "committed" and outcome.result is not None
    assert outcome.result.tool_calls[0].error is not None
    assert "unknown tool" in outcome.result.tool_calls[0].error


def test_a_mid_stream_failure_keeps_the_partial_text_off_the_chain(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    error = ModelError("model_error", "overloaded", retryable=True)
    rig.model.push(Fail(error, partial_text="I was saying"))
    outcome = rig.say(session.id, "tell me")
    assert outcome.status == "failed"
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
        head = uow.ledger.sessions.get(session.id)
    assert view is not None and head is not None
    assert view.turn.status == TurnStatus.FAILED and view.turn.error_kind == "model_error"
    assert view.messages[-1].content == {"text": "I was saying", "partial": True}
    assert head.thread_id is None  # a failed attempt never becomes the head


def test_abort_mid_stream_commits_an_aborted_turn_with_its_partial_text(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()

    def abort_then_talk(request: ModelRequest) -> ScriptStep:
        rig.signals.request_abort(session.id)
        return Say("one two three four five")

    rig.model.push(abort_then_talk)
    outcome = rig.say(session.id, "go on")
    assert outcome.status == "committed" and outcome.result is not None
    assert outcome.result.status == TurnStatus.ABORTED
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
    assert view is not None and view.turn.status == TurnStatus.ABORTED
    assert view.messages[-1].content == {"text": "one ", "partial": True}


def test_abort_between_tools_gives_the_remaining_calls_a_synthetic_result(
    database: Database, clock: FakeClock
) -> None:
    first = RecordingTool("first")
    second = RecordingTool("second")
    rig = build_rig(database, clock, tools=[first, second], granted=["first", "second"])
    session = rig.session(capabilities=["test_tools"])
    first.on_call = lambda: rig.signals.request_abort(session.id)
    rig.model.push(CallTools((("first", {}), ("second", {}))))
    outcome = rig.say(session.id, "both please")
    assert outcome.status == "committed"
    assert outcome.result is not None and outcome.result.status == TurnStatus.ABORTED
    statuses = [c.status for c in outcome.result.tool_calls]
    assert statuses == [ToolCallStatus.COMPLETED, ToolCallStatus.SKIPPED]
    assert second.calls == []
    results = [m for m in outcome.result.messages if m.role == MessageRole.TOOL_RESULT]
    assert len(results) == 2  # every tool_use has its answer, so the next context is valid
    rig.signals.clear_abort(session.id)
    assert rig.say(session.id, "again").status == "committed"
    replay = rig.model.requests[-1].messages
    assert replay[2]["content"][1]["content"].startswith("skipped")


def test_a_steering_message_joins_the_running_turn_before_the_next_model_call(
    database: Database, clock: FakeClock
) -> None:
    probe = RecordingTool("probe")
    rig = build_rig(database, clock, tools=[probe], granted=["probe"])
    session = rig.session(capabilities=["test_tools"])
    probe.on_call = lambda: rig.signals.steer(session.id, QueryMessage(text="actually, in French"))
    rig.model.push(CallTools((("probe", {}),)), Say("D'accord."))
    outcome = rig.say(session.id, "answer in English")
    assert outcome.result is not None and len(outcome.result.injected) == 1
    second = rig.model.requests[1].messages[-1]["content"]
    assert second[0]["type"] == "tool_result"
    assert second[-1]["text"] == "actually, in French"
    texts = [m.content.get("text") for m in outcome.result.messages if m.role == MessageRole.USER]
    assert texts == ["answer in English", "actually, in French"]
    assert len(rig.model.requests) == 2  # no second turn: the steer was answered in this one


def test_a_fenced_run_keeps_its_answer_as_a_superseded_attempt(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    with database.unit_of_work() as uow:
        stale_epoch = uow.ledger.sessions.claim(session.id)
        uow.ledger.sessions.claim(session.id)  # a newer run took the session meanwhile
        uow.commit()
    outcome = rig.turns.run_turn(session.id, [QueryMessage("late")], epoch=stale_epoch)
    assert outcome.status == "fenced"
    with database.unit_of_work() as uow:
        view = uow.ledger.threads.get_turn(outcome.turn_id)
        after = uow.ledger.sessions.get(session.id)
    assert view is not None and view.turn.status == TurnStatus.SUPERSEDED
    assert view.turn.error_message is not None and "superseded" in view.turn.error_message
    assert after is not None and after.thread_id is None


def test_progress_is_coalesced_and_a_commit_reports_in_one_publish(
    database: Database, clock: FakeClock
) -> None:
    """A fast stream of 300 words costs one `step.generating` and at most two deltas; all
    a turn tells its stream takes four publishes (four Redis round trips), not one per
    event or per token: the model call's end goes out with `turn.completing`, which tells
    watchers the commit is under way, and the commit's report follows it."""
    rig = build_rig(database, clock)
    session = rig.session()
    rig.model.push(Say(" ".join(f"word{n}" for n in range(300))))
    assert rig.say(session.id, "talk a lot").status == "committed"
    types = rig.publisher.types(session.id)
    assert types.count("step.generating") == 1
    assert 1 <= types.count("message.delta") <= 2
    assert types[-6:] == [
        "step.generated",
        "turn.completing",
        "message.created",
        "message.created",
        "turn.committed",
        "session.completed",
    ]
    # (session and step started) · (generating + delta) · (delta + generated + completing)
    # · (the commit's report)
    assert rig.publisher.calls == 4 < len(types)
    assert types[:2] == ["session.started", "step.started"]


class _Grouping(RecordingPublisher):
    """Keeps each publish's event types together: one publish, one round trip."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: list[list[str]] = []

    def publish_many(self, events: Sequence[StreamEvent]) -> None:
        if events:
            self.groups.append([event.type for event in events])
        super().publish_many(events)


def test_a_model_calls_end_goes_out_with_what_follows_it(
    database: Database, clock: FakeClock
) -> None:
    """`step.generated` waits for the publish that follows it at once: the first tool's
    `tool.started` after a call that asked for tools, `turn.completing` after the answer.
    Nothing is lost or reordered on the stream."""
    lookup = RecordingTool("lookup", answer={"found": 3})
    rig = build_rig(database, clock, tools=[lookup], granted=["lookup"])
    grouping = _Grouping()
    rig.turns = dataclasses.replace(rig.turns, publisher=grouping)
    session = rig.session(capabilities=["test_tools"])
    rig.model.push(CallTools((("lookup", {"q": "x"}),)), Say("There are 3."))
    assert rig.say(session.id, "how many?").status == "committed"
    with_tool = [g for g in grouping.groups if "tool.started" in g]
    assert with_tool and with_tool[0][-2:] == ["step.generated", "tool.started"]
    completing = grouping.groups[-2]
    assert completing[-2:] == ["step.generated", "turn.completing"]
    assert grouping.groups[-1][-2:] == ["turn.committed", "session.completed"]
    flat = [kind for group in grouping.groups for kind in group]
    assert flat.count("step.generated") == 2
    assert flat.index("tool.started") > flat.index("step.generated")


def test_a_slow_stream_reports_progress_once_per_interval(
    database: Database, clock: FakeClock
) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    rig.model.chunk_delay_s = 0.06  # slower than the 50 ms interval: each word goes out
    rig.model.push(Say("one two three four"))
    rig.say(session.id, "slowly")
    events = [(kind, data) for sid, kind, data in rig.publisher.events if sid == session.id]
    progress = [data for kind, data in events if kind == "step.generating"]
    assert len(progress) >= 3
    chars = [p["chars"] for p in progress]
    assert chars == sorted(chars) and chars[-1] <= len("one two three four")
    assert {p["call"] for p in progress} == {1}
    # Each progress report goes out with the text it covers, right behind it.
    kinds = [kind for kind, _ in events]
    for at, kind in enumerate(kinds):
        if kind == "step.generating":
            assert kinds[at + 1] == "message.delta"


def test_session_started_names_the_turn_to_come_its_worker_and_when(
    database: Database, clock: FakeClock
) -> None:
    """What `running` shows while a turn runs is the turn that then commits."""
    rig = build_rig(database, clock)
    session = rig.session()
    outcome = rig.say(session.id, "hello")
    [started] = [d for sid, kind, d in rig.publisher.events if kind == "session.started"]
    assert started["turn_id"] == outcome.turn_id
    assert started["started_at"] == clock.now
    assert started["worker"] == f"{socket.gethostname()}:{os.getpid()}"
