"""Pooled Postgres connections: one idle past the threshold is checked before use and
replaced if dead; one in steady use is not pinged, and a dead one fails once, then the pool
starts afresh."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from nexus.db import Database
from nexus.db import database as database_module
from tests.services import PG_ADMIN_URL

pytestmark = pytest.mark.postgres


def _pid(database: Database) -> int:
    with database.unit_of_work() as uow:
        return int(uow.ledger.connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(pid: int) -> None:
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        admin.dispose()


@pytest.fixture
def pooled(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    monkeypatch.setattr(database_module, "PING_AFTER_IDLE_S", 0.0)
    database = Database(postgres_url, pool_size=1, max_overflow=0)
    try:
        yield database
    finally:
        database.close()


def test_a_connection_that_died_while_idle_is_replaced_before_use(pooled: Database) -> None:
    first = _pid(pooled)
    _terminate(first)  # a Postgres restart, as far as this connection can tell
    second = _pid(pooled)  # no error: the checkout found it dead and connected again
    assert second != first


def test_a_pinged_connection_is_handed_out_idle(pooled: Database) -> None:
    _pid(pooled)  # in the pool now, and pinged at its next checkout
    with pooled.reading() as reads:  # switching to autocommit needs no open transaction
        assert reads.ledger.connection.execute(text("SELECT 1")).scalar_one() == 1
    with pooled.unit_of_work() as uow:
        uow.ledger.connection.execute(text("SELECT 1"))
        uow.commit()


def test_a_connection_in_steady_use_is_not_pinged(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database_module, "PING_AFTER_IDLE_S", 3600.0)
    database = Database(postgres_url, pool_size=1, max_overflow=0)
    try:
        first = _pid(database)
        _terminate(first)
        # Not checked (it was used a moment ago): the statement fails, once.
        with pytest.raises(OperationalError):
            _pid(database)
        assert _pid(database) != first
    finally:
        database.close()


def _alive(pid: int) -> bool:
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            found = connection.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
            )
            return bool(found.scalar_one())
    finally:
        admin.dispose()


def test_close_ends_the_pooled_connections_and_dispose_leaves_them_to_their_owner(
    postgres_url: str,
) -> None:
    """close() is for a process done with the database (a test's teardown): its connections
    end now, not at garbage collection. dispose() is for a forked child, which must not
    close the sockets its parent still uses."""
    closing = Database(postgres_url)
    pid = _pid(closing)
    closing.close()
    assert not _alive(pid)

    forking = Database(postgres_url)
    with forking.engine.connect() as connection:
        pid = int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())
        # The parent's hold on its connection, as a forked child's parent keeps it: without
        # it, dropping the pool's last reference lets the garbage collector close it, and
        # what the test saw would depend on when that ran, not on dispose().
        owner = connection.connection.dbapi_connection
    forking.dispose()
    assert _alive(pid)
    assert owner is not None
    owner.close()
