"""A Postgres link that goes silent (tests/reliability/links.py) is noticed in bounded time:
a statement on an open connection and a new connection each give up after the database
timeout (nexus/db/bounds.py), and once the link heals the same `Database` works again. On
the server's side, a transaction whose client went silent is ended in as long, and the row
locks it held are released for another client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError
from structlog.testing import capture_logs

from nexus.db import Database, bounds
from nexus.db.bounds import connect_args
from tests.reliability.links import Link
from tests.services import POSTGRES_DRIVERS, with_driver

pytestmark = pytest.mark.postgres
TIMEOUT_S = 2.0  # libpq's least connect_timeout
# Room for the test process's own scheduling on a loaded machine.
SLACK_S = 3.0


@pytest.fixture
def through_link(postgres_url: str) -> Iterator[tuple[Database, Link]]:
    with _linked(postgres_url) as (database, link):
        yield database, link


@contextmanager
def _linked(postgres_url: str) -> Iterator[tuple[Database, Link]]:
    """A bounded `Database` whose connections go through a `Link` of their own."""
    parts = urlsplit(postgres_url)
    with Link((parts.hostname or "127.0.0.1", parts.port or 5432)) as link:
        user = f"{parts.username}@" if parts.username else ""
        url = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{link.port}"))
        database = Database(url, pool_size=2, max_overflow=0, timeout_s=TIMEOUT_S)
        try:
            yield database, link
        finally:
            link.heal()
            database.close()


@pytest.fixture
def held_row(postgres_url: str) -> Iterator[str]:
    """A table of its own holding one row (id 1), for a test to lock: its name."""
    table = f"held_{uuid4().hex[:12]}"
    direct = Database(postgres_url)
    with direct.unit_of_work() as uow:
        uow.connection.execute(text(f"CREATE TABLE {table} (id int PRIMARY KEY)"))
        uow.connection.execute(text(f"INSERT INTO {table} VALUES (1)"))
        uow.commit()
    try:
        yield table
    finally:
        with direct.unit_of_work() as uow:
            uow.connection.execute(text(f"DROP TABLE {table}"))
            uow.commit()
        direct.close()


def _select(database: Database) -> int:
    with database.reading() as uow:
        return int(uow.connection.execute(text("SELECT 1")).scalar_one())


def _within(seconds: float, call: Callable[[], object]) -> BaseException | None:
    """What `call` raised, or None; fails if it has not ended after `seconds` (it then
    hangs on in a daemon thread until the link heals)."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # handed to the test
            raised.append(error)
        else:
            raised.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert raised, f"still waiting on the database after {seconds:.1f} s"
    return raised[0]


def test_a_statement_on_a_silent_link_gives_up_and_the_pool_recovers_after_the_heal(
    through_link: tuple[Database, Link],
) -> None:
    database, link = through_link
    assert _select(database) == 1  # a pooled connection, in steady use
    link.cut()
    started = time.monotonic()
    error = _within(TIMEOUT_S + SLACK_S, lambda: _select(database))
    assert isinstance(error, OperationalError), error
    print(f"\nthe statement gave up after {time.monotonic() - started:.1f} s")
    # The pool's connections were dropped: a new one waits on the handshake, bounded too.
    started = time.monotonic()
    error = _within(TIMEOUT_S + SLACK_S, lambda: _select(database))
    assert isinstance(error, OperationalError), error
    print(f"a new connection gave up after {time.monotonic() - started:.1f} s")
    link.heal()
    assert _select(database) == 1


def test_libpq_parameters_bound_a_connection_and_probe_an_idle_one() -> None:
    args = connect_args(30)
    assert args["connect_timeout"] == 10
    assert args["keepalives"] == 1
    assert args["keepalives_idle"] + args["keepalives_interval"] * args["keepalives_count"] <= 30
    assert args["tcp_user_timeout"] == 30_000
    assert connect_args(0.5)["connect_timeout"] == 2


def _row_lock_taken(database: Database, table: str) -> bool:
    """Whether `database` takes the row's lock now (and gives it back), not waiting."""
    with database.unit_of_work() as uow:
        try:
            uow.connection.execute(text(f"SELECT id FROM {table} WHERE id = 1 FOR UPDATE NOWAIT"))
        except OperationalError as error:
            if getattr(error.orig, "sqlstate", None) == "55P03":  # lock_not_available
                return False
            raise
        return True


def _backend_alive(database: Database, pid: int) -> bool:
    with database.reading() as uow:
        query = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")
        return bool(uow.connection.execute(query, {"pid": pid}).scalar_one())


def _until(what: str, deadline: float, condition: Callable[[], bool]) -> None:
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not by the deadline"
        time.sleep(0.05)  # the pace of the poll


@pytest.mark.parametrize("driver", sorted(POSTGRES_DRIVERS))
def test_a_transaction_cut_off_holding_a_row_lock_is_ended_by_the_server(
    postgres_url: str, held_row: str, driver: str
) -> None:
    """A client that locks a row and goes silent (a dead switch: the server's TCP
    connection stays up) leaves the lock to the server, which ends the transaction idle for
    longer than the bound and drops the backend; another client then takes the lock."""
    direct = Database(postgres_url)  # another worker's connection, which the cut spares
    try:
        with _linked(with_driver(postgres_url, driver)) as (database, link):
            connection = database.engine.connect()
            transaction = connection.begin()
            pid = int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())
            connection.execute(text(f"SELECT id FROM {held_row} WHERE id = 1 FOR UPDATE"))
            locked_at = time.monotonic()
            link.cut()
            deadline = locked_at + TIMEOUT_S + SLACK_S
            attempts: list[bool] = []

            def taken() -> bool:
                attempts.append(_row_lock_taken(direct, held_row))
                return attempts[-1]

            _until("the row lock released", deadline, taken)
            released_s = time.monotonic() - locked_at
            _until("the cut-off backend gone", deadline, lambda: not _backend_alive(direct, pid))
            gone_s = time.monotonic() - locked_at
            print(
                f"\n{driver}: the lock was taken {released_s:.2f} s after it was held "
                f"(refused {len(attempts) - 1} times), the backend gone after {gone_s:.2f} s"
            )
            # The server's timeout ended it, not anything sooner: it waits for the bound.
            assert released_s >= TIMEOUT_S
            # Once the link heals, the client finds its connection ended: by the server's
            # message saying why (psycopg 3: an InternalError), or, when the proxy's write
            # to the closed backend drew a reset that dropped it, by the closed connection.
            link.heal()
            with pytest.raises(DBAPIError, match=r"idle-in-transaction timeout|closed"):
                connection.execute(text("SELECT 1"))
            transaction.rollback()
            connection.close()
    finally:
        direct.close()


@pytest.mark.parametrize("driver", sorted(POSTGRES_DRIVERS))
def test_the_server_is_told_the_bound_and_the_users_own_options_are_kept(
    postgres_url: str, driver: str
) -> None:
    # The user's own: one setting of theirs, one the server would be told after connecting.
    url = with_driver(postgres_url, driver) + (
        "?options=-c%20work_mem%3D4242kB%20-c%20client_connection_check_interval%3D250"
    )
    database = Database(url, timeout_s=TIMEOUT_S)
    try:
        settings = _settings(database)
    finally:
        database.close()
    assert settings["work_mem"] == "4242"
    assert settings["idle_in_transaction_session_timeout"] == str(int(TIMEOUT_S * 1000))
    assert settings["tcp_keepalives_count"] == str(bounds.KEEPALIVE_PROBES)
    # Set once connected, this server being 14 or later.
    assert settings["tcp_user_timeout"] == str(int(TIMEOUT_S * 1000))
    assert settings["client_connection_check_interval"] == "250"  # theirs stands
    # No bound on a statement's own length.
    assert settings["statement_timeout"] == "0"


def test_a_setting_the_server_refuses_leaves_its_default_and_is_not_asked_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []

    def later(timeout_s: float, server_version: int) -> dict[str, int]:
        asked.append(server_version)
        return {"client_connection_check_interval": -1}  # out of range: refused

    monkeypatch.setattr(bounds, "later_settings", later)
    database = Database(postgres_url, pool_size=2, max_overflow=0, timeout_s=TIMEOUT_S)
    try:
        with (
            capture_logs() as logs,
            database.engine.connect() as first,
            database.engine.connect() as second,
        ):
            for connection in (first, second):
                value = connection.execute(text("SHOW client_connection_check_interval"))
                assert value.scalar_one() == "0"
    finally:
        database.close()
    assert len(asked) == 2  # each new connection looks, and sends the refused setting once
    refusals = [log for log in logs if log["event"] == "database_setting_refused"]
    assert [log["setting"] for log in refusals] == ["client_connection_check_interval"]


def _settings(database: Database) -> dict[str, str]:
    with database.reading() as uow:
        rows = uow.connection.execute(text("SELECT name, setting FROM pg_settings"))
        return {str(name): str(setting) for name, setting in rows}
