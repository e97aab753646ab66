"""Read-only SQL over the ledger, for hooks (`ctx.sql`): bounded in time and in rows.

On Postgres the query runs in a transaction that is `READ ONLY` from its first statement,
with `statement_timeout` set for it alone (`SET LOCAL`), and is always rolled back: what a
query sets for its session (`set_config`) goes with it. On SQLite it runs on a connection
of its own opened `mode=ro`, with `query_only` on, an authorizer that allows reading and
nothing else, and a progress handler that interrupts it at its deadline. On both, the
query is first checked to be one read-only statement (nexus/db/sql_guard.py).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import sqlite3
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import exc, text
from sqlalchemy.engine import make_url

from nexus.db.database import Database
from nexus.db.sql_guard import SqlRefused, read_only_statement

READ_ONLY = "SQL for hooks is read-only"
# Postgres' SQLSTATEs: a write in a read-only transaction, a statement cancelled (by
# statement_timeout), a privilege missing, a feature refused (a cursor over a write).
_PG_READ_ONLY, _PG_CANCELLED, _PG_PRIVILEGE = "25006", "57014", "42501"
_PG_UNSUPPORTED = "0A000"
# What SQLite's authorizer lets a hook's query do: read tables, call functions, recurse.
_SQLITE_READING = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_PROGRESS_EVERY = 1000  # SQLite VM steps between looks at the clock


class ReadOnlyQueryError(Exception):
    """A hook's query that did not run, or not to its end; the message is for the hook."""


class WriteRefused(ReadOnlyQueryError):
    """The query would write, or is not one read-only statement."""


class QueryTimedOut(ReadOnlyQueryError):
    """The query ran over its time bound and was cut."""


class TooManyRows(ReadOnlyQueryError):
    """The query returned more rows than a hook may take at once."""


def run_read_only(
    database: Database,
    query: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout_ms: int,
    max_rows: int,
) -> list[dict[str, Any]]:
    """The query's rows as JSON-ready dictionaries (column name to value), at most
    `max_rows` of them (more is TooManyRows). Parameters are named: `:name` in the query.
    Nothing the query does is kept."""
    try:
        statement = read_only_statement(query)
    except SqlRefused as refused:
        raise WriteRefused(str(refused)) from None
    bound = dict(params or {})
    if database.dialect == "sqlite":
        columns, rows = _on_sqlite(database, statement, bound, timeout_ms, max_rows)
    else:
        columns, rows = _on_postgres(database, statement, bound, timeout_ms, max_rows)
    if len(rows) > max_rows:
        raise TooManyRows(
            f"the query returned more than {max_rows} rows: add a LIMIT (SQL for hooks "
            f"answers at most {max_rows})"
        )
    return [{name: _json(value) for name, value in zip(columns, row, strict=True)} for row in rows]


def _on_postgres(
    database: Database, statement: str, params: dict[str, Any], timeout_ms: int, max_rows: int
) -> tuple[list[str], list[tuple[Any, ...]]]:
    with database.engine.connect() as connection:
        transaction = connection.begin()
        try:
            # First in the transaction: after any query, it could no longer be made read-only.
            connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            connection.exec_driver_sql(f"SET LOCAL statement_timeout = {int(timeout_ms)}")
            # A cursor on the server: only the rows taken cross to the worker, not all.
            streamed = connection.execution_options(
                stream_results=True, max_row_buffer=max_rows + 1
            )
            result = streamed.execute(text(statement), params)
            if not result.returns_rows:
                raise WriteRefused(f"{READ_ONLY}: the statement returns no rows")
            columns = list(result.keys())
            rows = [tuple(row) for row in result.fetchmany(max_rows + 1)]
            result.close()
            return columns, rows
        except exc.DBAPIError as error:
            raise _from_postgres(error, timeout_ms) from None
        except exc.StatementError as error:  # a parameter missing, or of a type it cannot send
            raise ReadOnlyQueryError(f"SQL for hooks: {error.orig}") from None
        finally:
            transaction.rollback()


def _from_postgres(error: exc.DBAPIError, timeout_ms: int) -> ReadOnlyQueryError:
    orig = error.orig
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    message = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    if state == _PG_READ_ONLY:
        return WriteRefused(f"{READ_ONLY}: {message}")
    if state == _PG_CANCELLED:
        return QueryTimedOut(f"SQL for hooks: the query was cut at its bound of {timeout_ms} ms")
    if state == _PG_UNSUPPORTED and "data-modifying" in message:
        return WriteRefused(f"{READ_ONLY}: {message}")
    if state == _PG_PRIVILEGE:
        return WriteRefused(f"SQL for hooks is not allowed that: {message}")
    return ReadOnlyQueryError(f"SQL for hooks: {message}")


def _on_sqlite(
    database: Database, statement: str, params: dict[str, Any], timeout_ms: int, max_rows: int
) -> tuple[list[str], list[tuple[Any, ...]]]:
    path = make_url(database.url).database
    if not path or path == ":memory:":
        raise ReadOnlyQueryError("SQL for hooks needs a database file, not an in-memory one")
    uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=timeout_ms / 1000, check_same_thread=False)
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(_sqlite_authorizer)
        deadline = time.monotonic() + timeout_ms / 1000
        connection.set_progress_handler(
            lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_EVERY
        )
        try:
            cursor = connection.execute(statement, params)
            if cursor.description is None:
                raise WriteRefused(f"{READ_ONLY}: the statement returns no rows")
            columns = [column[0] for column in cursor.description]
            rows = [tuple(row) for row in cursor.fetchmany(max_rows + 1)]
        except sqlite3.Error as error:
            raise _from_sqlite(error, timeout_ms) from None
        return columns, rows
    finally:
        connection.close()


def _sqlite_authorizer(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _SQLITE_READING else sqlite3.SQLITE_DENY


def _from_sqlite(error: sqlite3.Error, timeout_ms: int) -> ReadOnlyQueryError:
    message = str(error)
    if message == "interrupted":
        return QueryTimedOut(f"SQL for hooks: the query was cut at its bound of {timeout_ms} ms")
    if "not authorized" in message or "readonly" in message or "read-only" in message:
        return WriteRefused(f"{READ_ONLY}: {message}")
    return ReadOnlyQueryError(f"SQL for hooks: {message}")


def _json(value: Any) -> Any:
    """A value as JSON carries it: what a hook process is sent, and what a thread gets."""
    if value is None or isinstance(value, str | bool | int | float | list | dict):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)
