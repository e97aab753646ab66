"""Engine construction for Postgres and SQLite, deferred until first use."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import make_url

from nexus.ids import Clock, now_ms

if TYPE_CHECKING:
    from nexus.db.unit_of_work import UnitOfWork


# Every spelling of a Postgres URL means the one driver Nexus ships and tests: psycopg 3.
# It prepares a statement on the server once a connection has run it a few times, so the
# turn commit (one large statement) is planned once per connection instead of per turn;
# that measured 0.8 → 1.05 of a bare per-turn write (bench/ledger.py). `+psycopg2` URLs
# from older configurations keep working: they are rewritten, not refused.
_POSTGRES_PREFIXES = ("postgres://", "postgresql://", "postgresql+psycopg2://")


def normalize_database_url(url: str) -> str:
    """Accept the common spellings of a Postgres URL and pin the psycopg (3) driver."""
    for prefix in _POSTGRES_PREFIXES:
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


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
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def build_engine(url: str, *, pool_size: int = 5, max_overflow: int = 10) -> Engine:
    """An engine for `url` with the settings Nexus relies on for each dialect."""
    url = normalize_database_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _configure_sqlite(engine)
        return engine
    engine = create_engine(
        url,
        # The repository reads rowcount after INSERT … ON CONFLICT DO NOTHING to tell "new"
        # from "already there"; psycopg forgets it once the cursor closes, so keep it.
        execution_options={"preserve_rowcount": True},
        pool_size=pool_size,
        max_overflow=max_overflow,
    )
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
        except Exception as error:
            # The pool discards this connection and checks out another (up to three times).
            raise exc.DisconnectionError(f"a pooled connection was dead: {error}") from error


class Database:
    """Holds one engine per process, built on first use and rebuilt after a fork."""

    def __init__(
        self, url: str, *, clock: Clock = now_ms, pool_size: int = 5, max_overflow: int = 10
    ) -> None:
        self.url = normalize_database_url(url)
        self.clock = clock
        self._pool_size = pool_size
        self._max_overflow = max_overflow
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = build_engine(
                self.url, pool_size=self._pool_size, max_overflow=self._max_overflow
            )
        return self._engine

    @property
    def dialect(self) -> str:
        return make_url(self.url).get_backend_name()

    def unit_of_work(self) -> UnitOfWork:
        from nexus.db.unit_of_work import UnitOfWork

        return UnitOfWork(self)

    def dispose(self) -> None:
        """Drop pooled connections; a forked child must not reuse its parent's sockets."""
        if self._engine is not None:
            self._engine.dispose(close=False)
            self._engine = None
