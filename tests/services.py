"""Where the test suite finds PostgreSQL and Redis, and how it makes its own databases."""

from __future__ import annotations

import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get(
    "NEXUS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def _this_process(redis_url: str) -> str:
    """`redis_url` with this test process's database: the one given (15 by default) for a
    serial run; under pytest-xdist each process counts down from it (gw0 the one given,
    gw1 the next lower, ...), so a test that flushes or counts keys sees only its own."""
    parts = urlsplit(redis_url)
    given = int(parts.path.strip("/") or 0)
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    return urlunsplit(parts._replace(path=f"/{(given - worker) % 16}"))


REDIS_URL = _this_process(os.environ.get("NEXUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
# The Postgres drivers the ledger runs on, by test id: psycopg 3 (the default) and psycopg2.
POSTGRES_DRIVERS = {"postgres": "postgresql+psycopg", "postgres-psycopg2": "postgresql+psycopg2"}
DEFAULT_DRIVER = "postgres"

HOW_TO_START = {
    "postgres": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "redis": (
        'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" '
        "--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log"
    ),
}


def postgres_problem() -> str | None:
    """None when Postgres answers at PG_ADMIN_URL, else what is wrong and how to fix it."""
    engine = create_engine(PG_ADMIN_URL)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        return None
    except Exception as error:
        return (
            f"PostgreSQL is not reachable at {PG_ADMIN_URL} ({type(error).__name__}: {error}). "
            f"Start it with: {HOW_TO_START['postgres']} (or run ./scripts/test, which does)."
        )
    finally:
        engine.dispose()


def redis_problem() -> str | None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
        return None
    except Exception as error:
        return (
            f"Redis is not reachable at {REDIS_URL} ({type(error).__name__}: {error}). "
            f"Start it with: {HOW_TO_START['redis']} (or run ./scripts/test, which does)."
        )


def create_database(prefix: str = "nexus_test") -> str:
    """Create a fresh, uniquely named database and return its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    name = make_url(url).database
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def with_driver(url: str, driver: str) -> str:
    """`url` through the driver `POSTGRES_DRIVERS[driver]`, the database unchanged."""
    named = make_url(url).set(drivername=POSTGRES_DRIVERS[driver])
    return named.render_as_string(hide_password=False)
