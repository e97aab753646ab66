"""Committing turns: compare-and-set on head and epoch, one transaction, nothing on fence."""

from __future__ import annotations

from typing import Literal

import pytest
from sqlalchemy import event, func, select

from nexus.db import Database
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus, TurnStatus, TurnType
from nexus.ledger.models import Base, Message, SessionHistory, Thread, Turn, table_of
from nexus.ledger.records import ConsumedItem, NewQueueItem, SessionRecord, TurnDraft
from nexus.ledger.repository import LedgerConflict
from tests.support import build_chain, compaction_turn, new_session, text_turn


def _count(database: Database, model: type[Base]) -> int:
    with database.unit_of_work() as uow:
        return int(
            uow.connection.execute(select(func.count()).select_from(table_of(model))).scalar_one()
        )


def test_commit_moves_the_head_and_writes_everything(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        epoch = uow.ledger.sessions.claim(session.id)
        first = text_turn(session, None, "hello")
        assert uow.ledger.turns.commit(first, epoch=epoch).committed
        second = text_turn(session, first.id, "again")
        outcome = uow.ledger.turns.commit(second, epoch=epoch)
        uow.commit()
    assert outcome.status == "committed" and outcome.turn_id == second.id
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
        assert head is not None and head.thread_id == second.id
        view = uow.ledger.threads.get_turn(second.id)
        thread = uow.ledger.threads.get_thread(second.id)
        moves = uow.ledger.sessions.history(session.id)
    assert view is not None
    assert [m.content["text"] for m in view.messages] == ["again", "re: again"]
    assert [m.sequence for m in view.messages] == [1, 2]
    assert view.turn.epoch == epoch and view.turn.total_tokens == 10
    assert thread is not None and thread.depth == 2 and thread.total_tokens == 20
    assert thread.anchor_turn_id == first.id  # no compaction yet: the root anchors
    assert moves == [
        (None, None, 0, "create"),
        (None, first.id, epoch, "normal"),
        (first.id, second.id, epoch, "normal"),
    ]


def test_stale_epoch_is_fenced_and_writes_nothing(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        stale = uow.ledger.sessions.claim(session.id)
        uow.ledger.sessions.claim(session.id)  # a newer run took over
        uow.commit()
    turns_before, messages_before = _count(database, Turn), _count(database, Message)
    history_before = _count(database, SessionHistory)
    with database.unit_of_work() as uow:
        outcome = uow.ledger.turns.commit(text_turn(session, None, "late"), epoch=stale)
        uow.commit()
    assert outcome.status == "fenced"
    assert "epoch" in (outcome.reason or "")
    assert _count(database, Turn) == turns_before
    assert _count(database, Message) == messages_before
    assert _count(database, SessionHistory) == history_before


def test_moved_head_is_fenced(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        epoch = uow.ledger.sessions.claim(session.id)
        root = text_turn(session, None, "one")
        uow.ledger.turns.commit(root, epoch=epoch)
        # A second draft built on the old (empty) head must not fork the chain.
        outcome = uow.ledger.turns.commit(text_turn(session, None, "two"), epoch=epoch)
        uow.commit()
    assert outcome.status == "fenced"
    assert "head moved" in (outcome.reason or "")
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
    assert head is not None and head.thread_id == root.id


def test_commit_consumes_its_queue_items(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE)
        )
        epoch = uow.ledger.sessions.claim(session.id)
        claimed = uow.ledger.queue.claim(session.id, epoch=epoch, lease_ms=60_000)
        draft = text_turn(
            session,
            None,
            "hi",
            consumed=(ConsumedItem(queue_item_id=item_id, disposition=Disposition.CONSUMED),),
        )
        assert uow.ledger.turns.commit(draft, epoch=epoch).committed
        uow.commit()
    assert [c.id for c in claimed] == [item_id]
    with database.unit_of_work() as uow:
        item = uow.ledger.queue.get(item_id)
    assert item is not None
    assert item.status == QueueStatus.DONE
    assert item.disposition == Disposition.CONSUMED
    assert item.consumed_by_turn_id == draft.id


def test_consuming_an_item_twice_is_refused_and_rolls_back(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE)
        )
        epoch = uow.ledger.sessions.claim(session.id)
        consumed = (ConsumedItem(queue_item_id=item_id, disposition=Disposition.CONSUMED),)
        first = text_turn(session, None, "one", consumed=consumed)
        uow.ledger.turns.commit(first, epoch=epoch)
        uow.commit()
    with database.unit_of_work() as uow, pytest.raises(LedgerConflict):
        uow.ledger.turns.commit(text_turn(session, first.id, "two", consumed=consumed), epoch=epoch)
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
    assert head is not None and head.thread_id == first.id
    assert _count(database, Turn) == 1


def _claimed_items(database: Database, count: int) -> tuple[SessionRecord, str, int, list[str]]:
    """A session with a root turn and `count` queue items claimed at a fresh epoch."""
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        epoch = uow.ledger.sessions.claim(session.id)
        root = text_turn(session, None, "first")
        assert uow.ledger.turns.commit(root, epoch=epoch).committed
        ids = [
            uow.ledger.queue.enqueue(NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE))[0]
            for _ in range(count)
        ]
        epoch = uow.ledger.sessions.claim(session.id)
        uow.ledger.queue.claim_ids(ids, epoch=epoch, lease_ms=60_000)
        uow.commit()
    return session, root.id, epoch, ids


def test_a_child_turn_consumes_items_of_several_dispositions(database: Database) -> None:
    session, root, epoch, ids = _claimed_items(database, 3)
    dispositions: list[Literal[Disposition.BATCHED, Disposition.INJECTED]] = [
        Disposition.BATCHED,
        Disposition.BATCHED,
        Disposition.INJECTED,
    ]
    consumed = tuple(
        ConsumedItem(queue_item_id=i, disposition=d) for i, d in zip(ids, dispositions, strict=True)
    )
    draft = text_turn(session, root, "all three", consumed=consumed)
    with database.unit_of_work() as uow:
        assert uow.ledger.turns.commit(draft, epoch=epoch).committed
        uow.commit()
    with database.unit_of_work() as uow:
        items = [uow.ledger.queue.get(i) for i in ids]
        view = uow.ledger.threads.get_turn(draft.id)
    assert [(i.status, i.disposition, i.consumed_by_turn_id) for i in items if i] == [
        (QueueStatus.DONE, d, draft.id) for d in dispositions
    ]
    assert view is not None and [m.content for m in view.messages] == [
        {"text": "all three"},
        {"text": "re: all three"},
    ]


def test_a_fenced_child_turn_writes_nothing_and_consumes_nothing(database: Database) -> None:
    session, root, epoch, ids = _claimed_items(database, 2)
    with database.unit_of_work() as uow:
        uow.ledger.sessions.claim(session.id)  # a newer run took over
        uow.commit()
    counts = [_count(database, m) for m in (Turn, Message, SessionHistory, Thread)]
    consumed = tuple(ConsumedItem(queue_item_id=i, disposition=Disposition.BATCHED) for i in ids)
    draft = text_turn(session, root, "late", consumed=consumed)
    with database.unit_of_work() as uow:
        outcome = uow.ledger.turns.commit(draft, epoch=epoch)
        uow.commit()
    assert outcome.status == "fenced" and "epoch" in (outcome.reason or "")
    assert [_count(database, m) for m in (Turn, Message, SessionHistory, Thread)] == counts
    with database.unit_of_work() as uow:
        items = [uow.ledger.queue.get(i) for i in ids]
    assert [i.status for i in items if i] == [QueueStatus.CLAIMED, QueueStatus.CLAIMED]


def test_off_chain_attempts_are_kept_but_never_become_head(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        epoch = uow.ledger.sessions.claim(session.id)
        failed = text_turn(session, None, "boom", status=TurnStatus.FAILED)
        uow.ledger.turns.record_attempt(failed, epoch=epoch)
        # The same parent may still get its chain child: the failure is off the chain.
        good = text_turn(session, None, "boom")
        assert uow.ledger.turns.commit(good, epoch=epoch).committed
        superseded = text_turn(session, None, "late", status=TurnStatus.SUPERSEDED)
        uow.ledger.turns.record_attempt(superseded, epoch=epoch - 1)
        uow.commit()
    with database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
        kept = uow.ledger.threads.get_turn(failed.id)
        assert uow.ledger.threads.get_thread(failed.id) is None
    assert head is not None and head.thread_id == good.id
    assert kept is not None and kept.turn.status == TurnStatus.FAILED
    assert len(kept.messages) == 2


def test_wrong_status_for_each_path_is_refused(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        with pytest.raises(ValueError, match="record_attempt"):
            uow.ledger.turns.commit(
                text_turn(session, None, "x", status=TurnStatus.FAILED), epoch=0
            )
        with pytest.raises(ValueError, match="commit"):
            uow.ledger.turns.record_attempt(text_turn(session, None, "x"), epoch=0)


def test_compaction_turn_sets_the_anchor_and_keeps_its_metadata(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        chain = build_chain(uow.ledger, session, 6)
        epoch = uow.ledger.sessions.claim(session.id)
        compaction = compaction_turn(
            session,
            chain[-1],
            "they said hello six times",
            first_kept=chain[-2],
            summarized_through=chain[-3],
            turns_summarized=4,
        )
        assert uow.ledger.turns.commit(compaction, epoch=epoch).committed
        after = text_turn(session, compaction.id, "next")
        assert uow.ledger.turns.commit(after, epoch=epoch).committed
        uow.commit()
    with database.unit_of_work() as uow:
        compaction_thread = uow.ledger.threads.get_thread(compaction.id)
        after_thread = uow.ledger.threads.get_thread(after.id)
        view = uow.ledger.threads.get_turn(compaction.id)
    assert compaction_thread is not None and compaction_thread.anchor_turn_id == compaction.id
    assert after_thread is not None and after_thread.anchor_turn_id == compaction.id
    assert view is not None and view.turn.turn_type == TurnType.COMPACTION


def test_compaction_metadata_must_match_the_turn_type(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        plain = text_turn(session, None, "x")
        mislabelled = TurnDraft(**{**plain.model_dump(), "turn_type": TurnType.COMPACTION})
        with pytest.raises(ValueError, match="compaction"):
            uow.ledger.turns.commit(mislabelled, epoch=0)


def test_thread_rows_exist_for_every_chain_turn(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        build_chain(uow.ledger, session, 12, compact_every=5, keep=2)
        uow.commit()
    assert _count(database, Thread) == _count(database, Turn) == 12


def test_a_first_turn_commits_in_one_statement_or_moves_the_pointer_last(
    database: Database,
) -> None:
    # Postgres writes every turn, a session's first included, in one statement. SQLite goes
    # step by step and must move the pointer last: pointing a session at a turn not yet
    # written leaves a deferred foreign-key violation pending, which SQLite settles by
    # scanning every session on each insert into turns.
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(" ".join(statement.split())[:40])

    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        epoch = uow.ledger.sessions.claim(session.id)
        event.listen(database.engine, "before_cursor_execute", record)
        try:
            assert uow.ledger.turns.commit(text_turn(session, None, "first"), epoch=epoch).committed
        finally:
            event.remove(database.engine, "before_cursor_execute", record)
        uow.commit()
    if database.dialect == "postgresql":
        assert len(statements) == 1 and statements[0].startswith("WITH moved AS"), statements
        return
    turn_insert = next(i for i, s in enumerate(statements) if s.startswith("INSERT INTO turns"))
    pointer = next(i for i, s in enumerate(statements) if s.startswith("UPDATE sessions SET"))
    assert turn_insert < pointer, statements


def test_a_turn_whose_parent_has_no_thread_row_is_refused_and_writes_nothing(
    database: Database,
) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        first = uow.ledger.turns.commit(
            text_turn(session, None, "first"), epoch=uow.ledger.sessions.claim(session.id)
        )
        uow.commit()
    assert first.committed and first.turn_id is not None
    with database.unit_of_work() as uow:  # corrupt on purpose: the parent's thread row goes
        uow.connection.execute(
            table_of(Thread).delete().where(table_of(Thread).c.turn_id == first.turn_id)
        )
        uow.commit()
    before = _count(database, Turn)
    with database.unit_of_work() as uow:
        epoch = uow.ledger.sessions.claim(session.id)
        with pytest.raises(LedgerConflict, match="has no thread row"):
            uow.ledger.turns.commit(text_turn(session, first.turn_id, "second"), epoch=epoch)
    assert _count(database, Turn) == before  # the unit of work rolled back
