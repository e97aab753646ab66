"""Forks and reads of the turn tree: context since the last compaction, full ancestry."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, text

from nexus.db import Database
from nexus.ledger.enums import SessionOrigin, TurnStatus
from nexus.ledger.repository import LabelTaken, NotForkable
from tests.support import build_chain, new_session, text_turn


def _questions(views: object) -> list[str]:
    return [v.messages[0].content["text"] for v in views]  # type: ignore[attr-defined]


def test_fork_from_turn_three_of_five(database: Database) -> None:
    with database.unit_of_work() as uow:
        main = new_session(uow.ledger, "main")
        chain = build_chain(uow.ledger, main, 5)
        fork = uow.ledger.sessions.fork(chain[2], label="what-if")
        epoch = uow.ledger.sessions.claim(fork.id)
        child = text_turn(fork, chain[2], "a different fourth question")
        assert uow.ledger.turns.commit(child, epoch=epoch).committed
        uow.commit()
    assert fork.origin == SessionOrigin.FORK
    assert fork.persona_id == main.persona_id
    assert fork.thread_id == chain[2]
    with database.unit_of_work() as uow:
        main_now = uow.ledger.sessions.get(main.id)
        fork_now = uow.ledger.sessions.get(fork.id)
        main_thread = uow.ledger.threads.read_ancestry(chain[-1])
        fork_thread = uow.ledger.threads.read_ancestry(child.id)
        child_view = uow.ledger.threads.get_turn(child.id)
        fork_history = uow.ledger.sessions.history(fork.id)
    assert main_now is not None and main_now.thread_id == chain[-1]  # untouched
    assert fork_now is not None and fork_now.thread_id == child.id
    assert child_view is not None and child_view.turn.parent_turn_id == chain[2]
    assert child_view.turn.session_id == fork.id
    assert _questions(main_thread) == [f"question {i}" for i in range(5)]
    assert _questions(fork_thread) == [
        "question 0",
        "question 1",
        "question 2",
        "a different fourth question",
    ]
    assert fork_history[0] == (None, chain[2], 0, "fork")


def test_fork_gets_a_generated_label_and_any_turn_is_forkable(database: Database) -> None:
    with database.unit_of_work() as uow:
        main = new_session(uow.ledger, "main")
        chain = build_chain(uow.ledger, main, 3)
        first = uow.ledger.sessions.fork(chain[0])
        second = uow.ledger.sessions.fork(chain[0])  # a turn with children forks again
    assert first.label.startswith("fork-") and second.label.startswith("fork-")
    assert first.label != second.label


def test_fork_refuses_unknown_and_off_chain_turns_and_taken_labels(database: Database) -> None:
    with database.unit_of_work() as uow:
        main = new_session(uow.ledger, "main")
        epoch = uow.ledger.sessions.claim(main.id)
        failed = text_turn(main, None, "boom", status=TurnStatus.FAILED)
        uow.ledger.turns.record_attempt(failed, epoch=epoch)
        chain = build_chain(uow.ledger, main, 1)
        with pytest.raises(NotForkable):
            uow.ledger.sessions.fork("01NOSUCHTURN0000000000000")
        with pytest.raises(NotForkable):
            uow.ledger.sessions.fork(failed.id)
        with pytest.raises(LabelTaken):
            uow.ledger.sessions.fork(chain[0], label="main")


def test_context_without_compaction_is_the_whole_chain(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        chain = build_chain(uow.ledger, session, 4)
        context = uow.ledger.threads.read_context(chain[-1])
        empty = uow.ledger.threads.read_context(None)
    assert context.compaction is None
    assert [v.turn.id for v in context.turns] == chain
    assert context.head is not None and context.head.depth == 4
    assert context.rows_read == 1 + 4 + 8
    assert context.anchor_depth == 1  # never compacted: the root anchors the chain
    assert empty.turns == () and empty.rows_read == 0


def test_context_after_compaction_is_summary_plus_kept_turns(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        # 10 normal turns, a compaction (depth 11) keeping the last 3, then 2 more turns.
        chain = build_chain(uow.ledger, session, 13, compact_every=11, keep=3)
        context = uow.ledger.threads.read_context(chain[-1])
        everything = uow.ledger.threads.read_ancestry(chain[-1])
    compaction_id = chain[10]
    assert context.compaction is not None
    assert context.compaction.turn_id == compaction_id
    assert context.compaction.summary == "summary through turn 10"
    assert context.compaction.first_kept_turn_id == chain[7]
    assert [v.turn.id for v in context.turns] == chain[7:10] + chain[11:]
    assert context.anchor_depth == 11  # the compaction turn's own depth
    assert len(everything) == 13  # nothing was deleted: the full thread is still there


def test_recursive_compactions_keep_only_the_newest_summary(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        # Compactions at depths 11, 22, 33, 44 and 55; the head is at depth 60.
        chain = build_chain(uow.ledger, session, 60, compact_every=11, keep=3)
        context = uow.ledger.threads.read_context(chain[-1])
    assert context.compaction is not None
    assert context.compaction.turn_id == chain[54]
    assert context.compaction.summary == "summary through turn 50"
    assert all(v.turn.turn_type == "normal" for v in context.turns)
    assert len(context.turns) == 3 + 5  # kept turns + turns since the compaction


def _tuples_touched(connection: Connection) -> int:
    """Rows Postgres itself fetched or scanned in this transaction, over the ledger tables."""
    return int(
        connection.execute(
            text(
                "SELECT COALESCE(SUM(COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)), 0) "
                "FROM pg_stat_xact_user_tables "
                "WHERE relname IN ('threads', 'turns', 'messages', 'tool_calls', 'compactions')"
            )
        ).scalar_one()
    )


@pytest.mark.slow
def test_context_read_cost_does_not_grow_with_depth(database: Database) -> None:
    """With a compaction every 50 turns, depth 10,000 reads no more rows than depth 100."""
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        chain = build_chain(uow.ledger, session, 10_000, compact_every=50, keep=10)
        uow.commit()
    # Heads at depth 100 / 10,000 are compaction turns; at 99 / 9,999 they are the worst
    # case, 49 turns after the latest compaction. Each pair sits at the same offset.
    pairs = {
        "at a compaction": (chain[99], chain[9_999]),
        "49 turns after": (chain[98], chain[9_998]),
    }
    for shallow, deep in pairs.values():
        with database.unit_of_work() as uow:
            shallow_read = uow.ledger.threads.read_context(shallow)
            deep_read = uow.ledger.threads.read_context(deep)
        assert shallow_read.head is not None and deep_read.head is not None
        assert deep_read.head.depth - shallow_read.head.depth == 9_900
        assert len(deep_read.turns) == len(shallow_read.turns) <= 10 + 49
        assert deep_read.rows_read <= shallow_read.rows_read

    if database.dialect == "postgresql":
        # The database's own counters, not the repository's word for it. Statistics are
        # refreshed first so that autovacuum cannot change the plans between the reads.
        with database.engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
        for name, (shallow, deep) in pairs.items():
            touched = {}
            for label, head in (("shallow", shallow), ("deep", deep)):
                with database.unit_of_work() as uow:
                    before = _tuples_touched(uow.connection)
                    uow.ledger.threads.read_context(head)
                    touched[label] = _tuples_touched(uow.connection) - before
            print(f"pg tuples touched, {name}: {touched}")
            assert 0 < touched["deep"] <= touched["shallow"], (name, touched)
        with database.unit_of_work() as uow:
            before = _tuples_touched(uow.connection)
            uow.ledger.threads.read_ancestry(chain[9_999])
            full = _tuples_touched(uow.connection) - before
        print(f"pg tuples touched by the full ancestry read at depth 10,000: {full}")
        assert full > 50 * touched["deep"]  # the compaction bound is what saves this
