"""The context cache's merged history: extended turn by turn, always what a fresh merge gives."""

from __future__ import annotations

import random

from nexus.engine.context import history_messages, turn_pieces
from nexus.engine.context_cache import ContextCache
from nexus.ledger.enums import CompactionTrigger, MessageRole, TurnStatus, TurnType
from nexus.ledger.records import (
    CompactionRecord,
    ContextRead,
    MessageRecord,
    ThreadRecord,
    TurnRecord,
    TurnView,
)

ROLES = [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL_CALL, MessageRole.TOOL_RESULT]


def _view(turn_id: str, parent: str | None, roles: list[MessageRole]) -> TurnView:
    turn = TurnRecord(
        id=turn_id,
        session_id="s",
        parent_turn_id=parent,
        turn_type=TurnType.NORMAL,
        status=TurnStatus.COMPLETED,
        queue_mode=None,
        epoch=1,
        started_at=0,
        completed_at=0,
        prompt_tokens=None,
        completion_tokens=None,
        cache_read_tokens=None,
        cache_write_tokens=None,
        total_tokens=None,
        model=None,
        stop_reason=None,
        error_kind=None,
        error_message=None,
        source_event_id=None,
    )
    messages = tuple(
        MessageRecord(
            id=f"{turn_id}-{n}",
            turn_id=turn_id,
            sequence=n,
            role=role,
            content={"text": f"{turn_id} {n}", "id": f"call-{turn_id}-{n}", "name": "t"},
            source=None,
            tool_call_id=f"call-{turn_id}-{n}",
            event_id=None,
            created_at=0,
        )
        for n, role in enumerate(roles, start=1)
    )
    return TurnView(turn=turn, messages=messages, tool_calls=())


def _context(anchor: str, views: list[TurnView], compaction: str | None) -> ContextRead:
    head = views[-1].turn.id if views else anchor
    summary = None
    if compaction is not None:
        summary = CompactionRecord(
            turn_id=compaction,
            summary=f"summary {compaction}",
            summarized_through_turn_id=None,
            first_kept_turn_id=None,
            turns_summarized=1,
            trigger=CompactionTrigger.MANUAL,
            instructions=None,
        )
    thread = ThreadRecord(
        turn_id=head,
        parent_turn_id=None,
        session_id="s",
        persona_id="p",
        depth=len(views),
        total_tokens=0,
        anchor_turn_id=anchor,
    )
    return ContextRead(head=thread, compaction=summary, turns=tuple(views), rows_read=0)


def test_extending_and_branching_always_give_what_a_fresh_merge_gives() -> None:
    rng = random.Random(7)
    cache = ContextCache()
    for anchor, compaction in (("root", None), ("c1", "c1"), ("root", "c2")):
        # A tree on one anchor: each new turn's parent is any turn so far, so successive
        # contexts continue each other, branch off, or run side by side at equal length.
        paths: list[list[TurnView]] = [[]]
        for number in range(60):
            base = rng.choice(paths)
            parent = base[-1].turn.id if base else None
            roles = [rng.choice(ROLES) for _ in range(rng.randint(0, 4))]
            path = [*base, _view(f"{anchor}-{compaction}-{number}", parent, roles)]
            paths.append(path)
            context = _context(anchor, path, compaction)
            assert cache.merged(context, turn_pieces) == history_messages(context, turn_pieces)


def test_a_merged_history_shared_with_later_requests_is_never_changed() -> None:
    cache = ContextCache()
    first = [_view("a", None, [MessageRole.USER, MessageRole.ASSISTANT])]
    before = cache.merged(_context("root", first, None), turn_pieces)
    snapshot = [dict(message, content=list(message["content"])) for message in before]
    longer = [*first, _view("b", "a", [MessageRole.ASSISTANT, MessageRole.USER])]
    cache.merged(_context("root", longer, None), turn_pieces)
    assert before == snapshot


def test_the_merged_histories_kept_are_bounded_by_turns_across_anchors() -> None:
    cache = ContextCache(sessions=10, turns=5)
    for anchor in ("a", "b", "c"):
        views = [_view(f"{anchor}{n}", f"{anchor}{n - 1}" if n else None, []) for n in range(2)]
        cache.merged(_context(anchor, views, None), turn_pieces)
    assert cache.merged_turns_held <= 5
    long = [_view(f"x{n}", f"x{n - 1}" if n else None, [MessageRole.USER]) for n in range(6)]
    context = _context("x", long, None)
    assert cache.merged(context, turn_pieces) == history_messages(context, turn_pieces)
    assert cache.merged_turns_held <= 5
