"""Shared fixtures: real PostgreSQL and SQLite ledgers, created and migrated by the suite."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from nexus.db import Database
from nexus.db.migrate import upgrade
from nexus.ledger.models import metadata
from nexus.queueing.coordination import Coordination, InProcessCoordination
from tests.services import (
    DEFAULT_DRIVER,
    POSTGRES_DRIVERS,
    create_database,
    drop_database,
    postgres_problem,
    redis_problem,
    with_driver,
)
from tests.support import FakeClock, redis_coordination

# The ledger's contract, and the turn commit raced by processes, run on every Postgres
# driver; every other suite on the default one only, which keeps the run's time in check.
ON_EVERY_DRIVER = (
    Path(__file__).parent / "contract",
    Path(__file__).parent / "integration" / "test_commit_race.py",
)


def _on_every_driver(path: Path) -> bool:
    return any(path.is_relative_to(root) for root in ON_EVERY_DRIVER)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`database` is every backend; `pg_database` every Postgres driver (contract suite),
    else the default driver."""
    drivers = (
        list(POSTGRES_DRIVERS) if _on_every_driver(metafunc.definition.path) else [DEFAULT_DRIVER]
    )
    if "database" in metafunc.fixturenames:
        metafunc.parametrize("database", ["sqlite", *drivers], indirect=True)
    if "pg_database" in metafunc.fixturenames:
        metafunc.parametrize("pg_database", drivers, indirect=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    # The suite runs against real services. A missing one is an error that stops the run,
    # never a reason to skip tests quietly.
    problems = [p for p in (postgres_problem(), redis_problem()) if p]
    if problems:
        pytest.exit("\n".join(problems), returncode=3)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A database of our own, migrated to head, dropped when the run ends."""
    url = create_database()
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(url)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file; each test gets a copy, which is faster than migrating."""
    path = tmp_path_factory.mktemp("sqlite-template") / "nexus.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# Emptying by DELETE with foreign-key triggers off costs ~5 ms a test where TRUNCATE of every
# table costs ~80 ms (a new file per table, synced at commit): hundreds of Postgres tests
# start from an empty ledger, so this is minutes of every run. It needs a superuser, which
# the suite's own database owner is on every machine it runs on; otherwise TRUNCATE.
_EMPTY_ALL = "; ".join(
    [
        "SET LOCAL session_replication_role = replica",
        *(f'DELETE FROM "{table.name}"' for table in reversed(metadata.sorted_tables)),
        "SELECT setval(c.oid, 1, false) FROM pg_class c WHERE c.relkind = 'S'"
        " AND c.relnamespace = 'public'::regnamespace",
    ]
)
_TRUNCATE_ALL = "TRUNCATE {} RESTART IDENTITY CASCADE".format(
    ", ".join(f'"{name}"' for name in metadata.tables)
)


_SUPERUSER: dict[str, bool] = {}  # by server and user: asked once a run, not once a test


def _truncate_postgres(database: Database) -> None:
    url = database.engine.url
    key = f"{url.host}:{url.port}:{url.username}"
    with database.engine.begin() as connection:
        if key not in _SUPERUSER:
            found = connection.execute(text("SELECT current_setting('is_superuser')")).scalar()
            _SUPERUSER[key] = found == "on"
        connection.exec_driver_sql(_EMPTY_ALL if _SUPERUSER[key] else _TRUNCATE_ALL)


@pytest.fixture
def database(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path, clock: FakeClock
) -> Iterator[Database]:
    """An empty, migrated ledger on each backend (and, for the contract suite, on each
    Postgres driver): the contract suite runs against all of them."""
    if request.param == "sqlite":
        path = tmp_path / "nexus.db"
        shutil.copyfile(sqlite_template, path)
        db = Database(f"sqlite:///{path}", clock=clock)
    else:
        url = with_driver(request.getfixturevalue("postgres_url"), request.param)
        db = Database(url, clock=clock)
        _truncate_postgres(db)
    try:
        yield db
    finally:
        db.close()


@pytest.fixture
def pg_database(
    request: pytest.FixtureRequest, postgres_url: str, clock: FakeClock
) -> Iterator[Database]:
    """An empty, migrated ledger on PostgreSQL only (through each driver in the contract
    suite)."""
    db = Database(with_driver(postgres_url, request.param), clock=clock)
    _truncate_postgres(db)
    try:
        yield db
    finally:
        db.close()


@pytest.fixture(params=["in-process", "redis"])
def coordination(request: pytest.FixtureRequest) -> Iterator[Coordination]:
    """The coordination port's in-process twin and the real Redis one, each test on both
    (a module may define its own `coordination` instead)."""
    if request.param == "in-process":
        yield InProcessCoordination()
        return
    with redis_coordination() as found:
        yield found
