"""Six OS processes race 200 commits each onto one session on Postgres: one linear chain."""

from __future__ import annotations

import itertools
import multiprocessing
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import func, select

from nexus.db import Database
from nexus.ledger.models import Turn
from nexus.ledger.records import SessionRecord
from tests.support import new_session, text_turn

PROCESSES = 6
ATTEMPTS = 200


def _race(url: str, session: SessionRecord, attempts: int, start: Any) -> dict[str, Any]:
    """One racer: alternately claim (epoch + 1) or reuse the epoch it read, then commit.

    Reusing an epoch is what a lock holder that never noticed a newer run would do; two such
    racers share an epoch, so only the head half of the compare-and-set can stop one of them.
    """
    database = Database(url)
    outcomes: Counter[str] = Counter()
    committed: list[str] = []
    errors: list[str] = []
    start.wait()
    for attempt in range(attempts):
        try:
            with database.unit_of_work() as uow:
                if attempt % 2 == 0:
                    epoch = uow.ledger.sessions.claim(session.id)
                current = uow.ledger.sessions.get(session.id)
                assert current is not None
                if attempt % 2 == 1:
                    epoch = current.epoch
                uow.commit()
            draft = text_turn(session, current.thread_id, f"attempt {attempt}")
            with database.unit_of_work() as uow:
                outcome = uow.ledger.turns.commit(draft, epoch=epoch)
                uow.commit()
            outcomes[outcome.status] += 1
            if outcome.committed:
                committed.append(draft.id)
        except Exception as error:  # every error is a failure of the test, reported below
            errors.append(f"{type(error).__name__}: {error}")
    database.close()
    return {"outcomes": outcomes, "committed": committed, "errors": errors}


@pytest.mark.postgres
@pytest.mark.slow
def test_racing_processes_leave_one_linear_chain(pg_database: Database) -> None:
    with pg_database.unit_of_work() as uow:
        session = new_session(uow.ledger, "contested")
        uow.commit()

    context = multiprocessing.get_context("spawn")
    start = context.Manager().Event()
    with context.Pool(PROCESSES) as pool:
        pending = [
            pool.apply_async(_race, (pg_database.url, session, ATTEMPTS, start))
            for _ in range(PROCESSES)
        ]
        start.set()
        results = [p.get(timeout=300) for p in pending]

    errors = [e for r in results for e in r["errors"]]
    assert errors == []  # no IntegrityError (or anything else) reached a caller
    totals: Counter[str] = sum((r["outcomes"] for r in results), Counter())
    committed_ids = {turn_id for r in results for turn_id in r["committed"]}
    assert totals["committed"] + totals["fenced"] == PROCESSES * ATTEMPTS
    assert totals["fenced"] > 0, "the processes never collided: the race did not happen"
    assert totals["committed"] > 0

    with pg_database.unit_of_work() as uow:
        head = uow.ledger.sessions.get(session.id)
        assert head is not None and head.thread_id is not None
        chain = uow.ledger.threads.read_ancestry(head.thread_id)
        turns = uow.connection.execute(
            select(Turn.parent_turn_id, func.count())
            .where(Turn.session_id == session.id)
            .group_by(Turn.parent_turn_id)
        ).all()
    branching = [(parent, count) for parent, count in turns if count > 1]
    assert branching == []  # no turn has two children in the session
    assert len(chain) == totals["committed"] == sum(count for _, count in turns)
    assert {view.turn.id for view in chain} == committed_ids
    # Each link is the previous one's child, and epochs never go backwards along the chain.
    for parent, child in itertools.pairwise(chain):
        assert child.turn.parent_turn_id == parent.turn.id
        assert child.turn.epoch >= parent.turn.epoch
