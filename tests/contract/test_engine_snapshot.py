"""The engine reads a session in one round trip and then only the turns it has not read yet,
and what it assembles is exactly what a fresh read gives, whoever committed the turns."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import event

from nexus.adapters.scripted import CallTools, Say
from nexus.db import Database
from nexus.engine.context_cache import ContextCache
from nexus.ledger.enums import MessageSource
from tests.contract.engine_support import RecordingTool, build_rig
from tests.support import FakeClock


@contextmanager
def statements(database: Database) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(*args: object) -> None:
        if not str(args[2]).startswith("BEGIN"):  # SQLite's write lock, not a read
            seen.append(str(args[2]))

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(database.engine, "before_cursor_execute", record)


def test_consecutive_turns_read_only_what_is_new(database: Database, clock: FakeClock) -> None:
    rig = build_rig(database, clock)
    session = rig.session()
    for number in range(6):
        rig.say(session.id, f"question {number}")
    rig.turns.snapshot(session.id)
    with statements(database) as unchanged:
        again = rig.turns.snapshot(session.id)
    rig.say(session.id, "one more")
    with statements(database) as after_own:
        cached = rig.turns.snapshot(session.id)
    fresh = dataclasses.replace(rig.turns, contexts=ContextCache(0)).snapshot(session.id)
    # The head has not moved: the session read alone. One turn later, a turn this process
    # committed itself: still the session read alone, the turn is known from its commit.
    assert len(unchanged) == 1 and again.context.head is not None
    assert len(after_own) == 1
    assert cached == dataclasses.replace(
        fresh, context=fresh.context.model_copy(update={"rows_read": cached.context.rows_read})
    )
    assert len(cached.context.turns) == 7


def test_a_turn_committed_elsewhere_is_read_in_one_statement(
    database: Database, clock: FakeClock
) -> None:
    mine, theirs = build_rig(database, clock), build_rig(database, clock)
    session = mine.session()
    for number in range(3):
        mine.say(session.id, f"question {number}")
    theirs.say(session.id, "from another worker")
    with statements(database) as after_theirs:
        cached = mine.turns.snapshot(session.id)
    fresh = dataclasses.replace(mine.turns, contexts=ContextCache(0)).snapshot(session.id)
    assert len(after_theirs) == 1 + 1  # the session, then the walk with its messages
    assert cached.context.rows_read == 1 + 1 + 2
    assert cached == dataclasses.replace(
        fresh, context=fresh.context.model_copy(update={"rows_read": cached.context.rows_read})
    )


def test_a_tool_turn_known_from_its_commit_is_what_a_read_gives(
    database: Database, clock: FakeClock
) -> None:
    lookup = RecordingTool("lookup", answer={"found": 3, "where": {"z": 1, "a": [1, 2]}})
    rig = build_rig(database, clock, tools=[lookup], granted=["lookup", "current_time"])
    session = rig.session(capabilities=["test_tools"])
    rig.say(session.id, "hello")
    rig.turns.snapshot(session.id)
    rig.model.push(
        CallTools(
            (("lookup", {"q": "x", "b": {"d": 1, "c": 2}}), ("current_time", {})),
            text="Let me check.",
            thinking="I should look it up.",
        ),
        Say("There are 3."),
    )
    rig.say(session.id, "how many?", source=MessageSource.WEBHOOK)
    with statements(database) as seen:
        cached = rig.turns.snapshot(session.id)
    fresh = dataclasses.replace(rig.turns, contexts=ContextCache(0)).snapshot(session.id)
    assert len(seen) == 1
    assert cached == dataclasses.replace(
        fresh, context=fresh.context.model_copy(update={"rows_read": cached.context.rows_read})
    )
    # What the model is shown next is the same, block for block.
    shown = rig.turns.reader().assemble(cached, ()).request.messages
    assert shown == rig.turns.reader().assemble(fresh, ()).request.messages


def test_turns_another_process_committed_are_read(database: Database, clock: FakeClock) -> None:
    mine, theirs = build_rig(database, clock), build_rig(database, clock)
    session = mine.session()
    mine.say(session.id, "my name is Ada")
    theirs.say(session.id, "I live in Paris")  # another worker took this turn
    mine.say(session.id, "where do I live, and who am I?")
    replay = mine.model.requests[-1].messages
    said = [block["text"] for m in replay if m["role"] == "user" for block in m["content"]]
    assert "my name is Ada" in said and "I live in Paris" in said
    assert [m["role"] for m in replay] == ["user", "assistant"] * 2 + ["user"]


def test_the_cache_keeps_the_most_recently_used_sessions() -> None:
    from nexus.ledger.records import ContextRead, ThreadRecord

    def context(turn: str) -> ContextRead:
        head = ThreadRecord(
            turn_id=turn,
            parent_turn_id=None,
            session_id="s",
            persona_id="p",
            depth=1,
            total_tokens=0,
            anchor_turn_id=turn,
        )
        return ContextRead(head=head, compaction=None, turns=(), rows_read=1)

    cache = ContextCache(2)
    cache.put("a", context("t1"))
    cache.put("b", context("t2"))
    assert cache.get("a") is not None  # a is now the most recent
    cache.put("c", context("t3"))
    assert cache.get("b") is None and cache.get("a") is not None and len(cache) == 2
    off = ContextCache(0)
    off.put("a", context("t1"))
    assert off.get("a") is None
    empty = ContextRead(head=None, compaction=None, turns=(), rows_read=0)
    cache.put("d", empty)  # an empty session: nothing worth keeping
    assert cache.get("d") is None


def test_the_cache_holds_at_most_its_turns_in_all() -> None:
    from nexus.ledger.records import ContextRead, ThreadRecord, TurnRecord, TurnView

    def context(turns: int) -> ContextRead:
        head = ThreadRecord(
            turn_id="t",
            parent_turn_id=None,
            session_id="s",
            persona_id="p",
            depth=turns,
            total_tokens=0,
            anchor_turn_id="t",
        )
        # Only the number of turns counts here: a stand-in turn, not validated.
        stand_in = cast(Any, TurnRecord).model_construct(id="t")
        view = TurnView(turn=stand_in, messages=(), tool_calls=())
        return ContextRead(head=head, compaction=None, turns=(view,) * turns, rows_read=1)

    cache = ContextCache(10, turns=5)
    cache.put("a", context(2))
    cache.put("b", context(2))
    cache.put("a", context(3))  # a grew: replaced, not added to
    assert cache.turns_held == 5 and len(cache) == 2
    cache.put("c", context(1))  # over: the least recently used (b) goes
    assert cache.get("b") is None and cache.turns_held == 4
    cache.put("d", context(6))  # longer than the whole budget: not kept
    assert cache.get("d") is None and cache.turns_held == 4


def test_each_turn_is_rendered_for_the_model_once(database: Database, clock: FakeClock) -> None:
    from nexus.engine.context import turn_pieces

    rig = build_rig(database, clock)
    session = rig.session("rendered")
    for said in ("one", "two", "three"):
        rig.say(session.id, said)
    cache = ContextCache(10, turns=2)
    views = dataclasses.replace(rig.turns, contexts=cache).snapshot(session.id).context.turns
    first = [cache.rendered(view) for view in views]
    assert first == [turn_pieces(view) for view in views]  # the same as rendering afresh
    again = [cache.rendered(view) for view in views[1:]]
    assert again[0] is first[1] and again[1] is first[2]  # the two most recent: kept
    assert cache.rendered(views[0]) is not first[0]  # bounded: the oldest went
    off = ContextCache(0)
    assert off.rendered(views[0]) is not off.rendered(views[0])  # a cache of 0 keeps nothing
