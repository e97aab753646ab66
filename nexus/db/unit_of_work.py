"""A unit of work: one transaction, the ledger bound to it, and after-commit callbacks."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

import structlog
from sqlalchemy import Connection, RootTransaction

from nexus.ledger.repository import Ledger

if TYPE_CHECKING:
    from nexus.db.database import Database

log = structlog.get_logger(__name__)


class UnitOfWork:
    """Entry points open one, call the core, and commit; leaving without commit rolls back.

    Callbacks registered with `after_commit` run only once the transaction is durable. That
    is where doorbells are rung: a task must never be published for a row that may still
    roll back (invariant 2, docs/architecture.md).
    """

    def __init__(self, database: Database, *, read_only: bool = False) -> None:
        self._database = database
        self._read_only = read_only
        self._connection: Connection | None = None
        self._transaction: RootTransaction | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._ledger: Ledger | None = None

    def __enter__(self) -> UnitOfWork:
        self._connection = self._database.engine.connect()
        if self._read_only:
            # Each read its own statement, no transaction around them: no BEGIN and ROLLBACK
            # round trips on Postgres (where READ COMMITTED gives each statement its own
            # snapshot anyway), and no write lock taken on SQLite (whose transactions all
            # begin IMMEDIATE). For reads that need no snapshot across statements.
            self._connection.execution_options(isolation_level="AUTOCOMMIT")
        else:
            self._transaction = self._connection.begin()
        self._ledger = Ledger(self._connection, clock=self._database.clock)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._transaction is not None and self._transaction.is_active:
                self._transaction.rollback()
        finally:
            if self._connection is not None:
                self._connection.close()
            self._connection = None
            self._transaction = None
            self._ledger = None
            self._callbacks.clear()

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            raise RuntimeError("the unit of work is not open: use it in a `with` block")
        return self._ledger

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            raise RuntimeError("the unit of work is not open: use it in a `with` block")
        return self._connection

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback` once this transaction has committed (never if it rolls back)."""
        self._callbacks.append(callback)

    def commit(self, *, hold: list[Callable[[], None]] | None = None) -> None:
        """Commit, then run the after-commit callbacks; with `hold`, hand them to the caller
        instead (appended to it), who runs them with `run_after_commit` when it is ready:
        a turn's report on the stream goes out before the doorbells its commit rang."""
        if self._read_only:
            raise RuntimeError("a read-only unit of work writes nothing and has nothing to commit")
        if self._transaction is None:
            raise RuntimeError("the unit of work is not open: use it in a `with` block")
        self._transaction.commit()
        callbacks, self._callbacks = self._callbacks, []
        if hold is not None:
            hold.extend(callbacks)
        else:
            run_after_commit(callbacks)

    def rollback(self) -> None:
        if self._transaction is not None and self._transaction.is_active:
            self._transaction.rollback()
        self._callbacks.clear()


def run_after_commit(callbacks: list[Callable[[], None]]) -> None:
    """Run (and empty) `callbacks` of a committed unit of work, each whatever the others do."""
    taken = callbacks[:]
    callbacks.clear()
    for callback in taken:
        try:
            callback()
        except Exception:
            # The commit stands. A lost doorbell is re-rung by the relay from the database,
            # so a failing callback is logged, never raised into the caller.
            log.exception("after_commit_callback_failed", callback=repr(callback))
