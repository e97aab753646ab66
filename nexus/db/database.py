"""`Database`: the SQLAlchemy engine for Postgres or SQLite, built on first use."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import make_url

from nexus.db import bounds
from nexus.ids import Clock, now_ms

if TYPE_CHECKING:
    from nexus.db.unit_of_work import UnitOfWork


# A Postgres URL that names no driver means psycopg 3, the one Nexus installs. It prepares a
# statement on the server once a connection has run it a few times, so the turn commit (one
# large statement) is planned once per connection instead of per turn (README: the default
# driver). A URL that names its driver gets that driver: `postgresql+psycopg2://` runs on
# psycopg2 (the `psycopg2` extra), `postgresql+psycopg://` on psycopg 3.
_BARE_POSTGRES_PREFIXES = ("postgres://", "postgresql://")
_DEFAULT_POSTGRES_PREFIX = "postgresql+psycopg://"

# The package each supported Postgres driver imports, and how to install it.
_DRIVER_PACKAGES = {
    "psycopg": ("psycopg", "pip install 'psycopg[binary]>=3.2,<4' (a dependency of Nexus)"),
    "psycopg2": (
        "psycopg2",
        "pip install 'nexus-broker[psycopg2]', or write postgresql:// for psycopg 3 "
        "(installed with Nexus)",
    ),
}


class DatabaseDriverMissing(ImportError):
    """NEXUS_DATABASE_URL names a database driver that is not installed here."""

    def __init__(self, package: str, install: str) -> None:
        super().__init__(
            f"NEXUS_DATABASE_URL needs the {package} driver, which is not installed: {install}"
        )
        self.install = install


def normalize_database_url(url: str) -> str:
    """Accept the common spellings of a Postgres URL; one that names no driver gets psycopg 3."""
    for prefix in _BARE_POSTGRES_PREFIXES:
        if url.startswith(prefix):
            return _DEFAULT_POSTGRES_PREFIX + url[len(prefix) :]
    return url


def require_driver(url: str) -> None:
    """Raise DatabaseDriverMissing, saying how to install it, when the Postgres driver the
    (normalized) URL names cannot be imported; SQLAlchemy's own error names no fix."""
    dialect, _, driver = url.split("://", 1)[0].partition("+")
    known = _DRIVER_PACKAGES.get(driver) if dialect == "postgresql" else None
    if known is None:
        return
    package, install = known
    try:
        importlib.import_module(package)
    except ImportError as error:
        raise DatabaseDriverMissing(package, install) from error


def _configure_sqlite(engine: Engine) -> None:
    # pysqlite's own transaction handling defers BEGIN and never takes the write lock up
    # front; two writers can then deadlock on lock upgrade. We switch it off and begin every
    # transaction IMMEDIATE, so writers queue on busy_timeout instead (SQLAlchemy's recipe).
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            return  # a read-only unit of work: each statement on its own, no write lock
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def build_engine(
    url: str, *, pool_size: int = 5, max_overflow: int = 10, timeout_s: float | None = None
) -> Engine:
    """An engine for `url` with the settings Nexus relies on for each dialect. `timeout_s`:
    on Postgres, the longest a connection or a round trip may wait for the server before
    the connection is given up, and the server told to give up on a vanished client in as
    long (nexus/db/bounds.py); None waits as long as TCP does (the migrations, whose
    statements may take long)."""
    url = normalize_database_url(url)
    require_driver(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _configure_sqlite(engine)
        return engine
    options = bounds.given_options(parsed.query)
    engine = create_engine(
        url,
        connect_args=bounds.connect_args(timeout_s, options=options) if timeout_s else {},
        # The repository reads rowcount after INSERT … ON CONFLICT DO NOTHING to tell "new"
        # from "already there"; psycopg forgets it once the cursor closes, so keep it.
        execution_options={"preserve_rowcount": True},
        pool_size=pool_size,
        max_overflow=max_overflow,
    )
    if timeout_s:
        bounds.tell_the_server(engine, timeout_s, options=options)
    if timeout_s and parsed.get_driver_name() == "psycopg":
        bounds.bound_round_trips(engine, timeout_s)
    _ping_when_idle(engine, after_s=PING_AFTER_IDLE_S)
    return engine


# A pooled connection idle longer than this is pinged before it is handed out, so a
# restarted Postgres never hands out a dead one. One in steady use is not: a ping on every
# checkout (`pool_pre_ping`) cost a round trip per unit of work, eight on a turn's path.
# A connection that dies while in use fails its statement, and SQLAlchemy then drops every
# connection the pool held, so the next checkout connects afresh.
PING_AFTER_IDLE_S = 1.0


def _ping_when_idle(engine: Engine, *, after_s: float) -> None:
    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since <= after_s:
            return  # new, or in steady use
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
            # The driver opened a transaction for the ping: close it, so the connection is
            # handed out idle (a read-only unit of work switches it to autocommit, which a
            # connection inside a transaction refuses).
            dbapi_connection.rollback()
        except Exception as error:
            # The pool discards this connection and checks out another (up to three times).
            raise exc.DisconnectionError(f"a pooled connection was dead: {error}") from error


class Database:
    """Holds one engine per process, built on first use and rebuilt after a fork."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = now_ms,
        pool_size: int = 5,
        max_overflow: int = 10,
        timeout_s: float | None = None,
    ) -> None:
        self.url = normalize_database_url(url)
        require_driver(self.url)  # at startup, not at the first query
        self.clock = clock
        self._pool_size = pool_size
        self._max_overflow = max_overflow
        self._timeout_s = timeout_s
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = build_engine(
                self.url,
                pool_size=self._pool_size,
                max_overflow=self._max_overflow,
                timeout_s=self._timeout_s,
            )
        return self._engine

    @property
    def dialect(self) -> str:
        return make_url(self.url).get_backend_name()

    def unit_of_work(self) -> UnitOfWork:
        from nexus.db.unit_of_work import UnitOfWork

        return UnitOfWork(self)

    def reading(self) -> UnitOfWork:
        """A unit of work for reads alone: no transaction (see UnitOfWork), no commit."""
        from nexus.db.unit_of_work import UnitOfWork

        return UnitOfWork(self, read_only=True)

    def dispose(self) -> None:
        """Drop pooled connections without closing them: a forked child must not reuse its
        parent's sockets, nor close them under the parent."""
        if self._engine is not None:
            self._engine.dispose(close=False)
            self._engine = None

    def close(self) -> None:
        """Close every pooled connection: this process is done with the database (a
        dropped pool's connections would otherwise stay open until garbage collection)."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
