"""A Postgres link that goes silent (tests/reliability/links.py) is noticed in bounded time:
a statement on an open connection and a new connection each give up after the database
timeout (nexus/db/bounds.py), and once the link heals the same `Database` works again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from nexus.db import Database
from nexus.db.bounds import connect_args
from tests.reliability.links import Link

pytestmark = pytest.mark.postgres
TIMEOUT_S = 2.0  # libpq's least connect_timeout
# Room for the test process's own scheduling on a loaded machine.
SLACK_S = 3.0


@pytest.fixture
def through_link(postgres_url: str) -> Iterator[tuple[Database, Link]]:
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
