"""A context read before is extended by the turns after it, never trusted beyond them: the
result is always what a full read gives."""

from __future__ import annotations

import pytest

from nexus.db import Database
from nexus.ledger.repository import NotFound
from tests.support import build_chain, new_session, text_turn


def _ids(context: object) -> list[str]:
    return [v.turn.id for v in context.turns]  # type: ignore[attr-defined]


def test_a_known_context_is_extended_by_the_new_turns_only(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        chain = build_chain(uow.ledger, session, 6)
        known = uow.ledger.threads.read_context(chain[3])
        extended = uow.ledger.threads.read_context(chain[-1], known=known)
        full = uow.ledger.threads.read_context(chain[-1])
        same = uow.ledger.threads.read_context(chain[-1], known=full)
    assert extended == full.model_copy(update={"rows_read": extended.rows_read})
    assert _ids(extended) == chain
    # Two new turns (their thread rows, two messages each) and the head row: not the chain.
    assert extended.rows_read == 1 + 2 + 4 < full.rows_read
    assert same is full  # the head has not moved: nothing more to read


def test_a_known_context_on_another_branch_is_not_used(database: Database) -> None:
    with database.unit_of_work() as uow:
        main = new_session(uow.ledger, "main")
        chain = build_chain(uow.ledger, main, 4)
        fork = uow.ledger.sessions.fork(chain[1], label="what-if")
        epoch = uow.ledger.sessions.claim(fork.id)
        sibling = text_turn(fork, chain[1], "another third question")
        assert uow.ledger.turns.commit(sibling, epoch=epoch).committed
        # Same anchor (the root), same depth as chain[2]: a sibling, not an ancestor.
        known = uow.ledger.threads.read_context(sibling.id)
        read = uow.ledger.threads.read_context(chain[-1], known=known)
        shallower = uow.ledger.threads.read_context(chain[1])
        deeper_known = uow.ledger.threads.read_context(chain[-1])
        from_deeper = uow.ledger.threads.read_context(chain[1], known=deeper_known)
    assert _ids(read) == chain
    assert from_deeper == shallower


def test_a_compaction_in_between_reads_afresh(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        # Normal turns at depths 1 to 10, a compaction at 11 keeping 3, then turns 12 to 14.
        chain = build_chain(uow.ledger, session, 14, compact_every=11, keep=3)
        before = uow.ledger.threads.read_context(chain[8])
        across = uow.ledger.threads.read_context(chain[-1], known=before)
        at_compaction = uow.ledger.threads.read_context(chain[10])
        after = uow.ledger.threads.read_context(chain[-1], known=at_compaction)
        full = uow.ledger.threads.read_context(chain[-1])
    assert across == full
    assert after.model_copy(update={"rows_read": 0}) == full.model_copy(update={"rows_read": 0})
    assert _ids(after) == chain[7:10] + chain[11:]
    assert after.rows_read < full.rows_read


def test_the_snapshot_reads_session_persona_capabilities_and_context(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        empty = uow.ledger.snapshots.read(session.id)
        chain = build_chain(uow.ledger, session, 3)
        uow.ledger.agents.set_capabilities(
            session.persona_id,
            [("noop", "No-op", "", "available"), ("current_time", "Time", "", "available")],
        )
        read = uow.ledger.snapshots.read(session.id)
        persona = uow.ledger.agents.get(session.persona_id)
        current = uow.ledger.sessions.get(session.id)
        with pytest.raises(NotFound):
            uow.ledger.snapshots.read("01NOSUCHSESSION00000000000")
    assert empty.context.head is None and empty.capability_ids == ()
    assert read.session == current and read.persona == persona
    assert read.capability_ids == ("noop", "current_time")  # in position order
    assert _ids(read.context) == chain
