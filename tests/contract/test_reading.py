"""A read-only unit of work: no transaction around its reads, so no BEGIN and ROLLBACK round
trips on Postgres and no write lock on SQLite, and nothing it could commit."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event, text

from nexus.db import Database
from tests.support import new_session


def test_reads_take_no_transaction_and_cannot_commit(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        uow.commit()
    sent: list[str] = []
    event.listen(database.engine, "before_cursor_execute", lambda *a: sent.append(str(a[2])))

    def autocommit(uow: object) -> bool:
        dbapi = uow.ledger.connection.connection.dbapi_connection  # type: ignore[attr-defined]
        # psycopg and psycopg2 send BEGIN themselves unless in autocommit; SQLite's BEGIN
        # IMMEDIATE is a statement of ours, seen in `sent`.
        return database.dialect == "sqlite" or bool(dbapi.autocommit)

    with database.reading() as reads:
        found = reads.ledger.sessions.get(session.id)
        read_alone = autocommit(reads)
        with pytest.raises(RuntimeError, match="nothing to commit"):
            reads.commit()
    assert found is not None and found.id == session.id and read_alone
    assert not any(s.startswith("BEGIN") for s in sent)
    # The connection goes back to the pool as it came: the next unit of work is a transaction.
    with database.unit_of_work() as uow:
        uow.ledger.connection.execute(text("SELECT 1"))
        in_transaction = database.dialect == "sqlite" or not autocommit(uow)
        uow.commit()
    assert in_transaction
    assert database.dialect != "sqlite" or (sent[-1] == "SELECT 1" and "BEGIN IMMEDIATE" in sent)


def test_a_reader_holds_no_lock_a_writer_waits_for(database: Database) -> None:
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        uow.commit()
    wrote = threading.Event()

    def write() -> None:
        with database.unit_of_work() as uow:
            uow.ledger.sessions.claim(session.id)
            uow.commit()
        wrote.set()

    with database.reading() as reads:
        reads.ledger.sessions.get(session.id)
        writer = threading.Thread(target=write)
        started = time.monotonic()
        writer.start()
        # On SQLite a transaction would have taken the write lock at its BEGIN IMMEDIATE,
        # and the writer would wait for this block to end.
        assert wrote.wait(timeout=5)
        assert time.monotonic() - started < 5
        after = reads.ledger.sessions.get(session.id)
    writer.join()
    assert after is not None and after.epoch == 1  # a new statement sees the commit
