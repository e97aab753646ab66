"""Hot statements compiled once and handed straight to the driver (sqlite3 or psycopg).

SQLAlchemy's per-execution work (parameter processing, execution context, result metadata)
cost ~110 µs a statement on Postgres and ~20 µs on SQLite: on the turn commit and the
snapshot read that was more than the database's own work. The statements stay SQLAlchemy
Core constructs defined once in the repository; only their execution skips the per-call
layer. What that layer did and these paths still must do, they do themselves:

- the connection's `before_cursor_execute`/`after_cursor_execute` events fire, so whatever
  counts or logs statements (the counts benchmark, the tests) still sees each one;
- a driver error goes through Core's own handling: raised as SQLAlchemy's exception for it
  (`IntegrityError`, …), and a lost connection drops the pool's connections.

Parameters must be what the driver accepts as they are: JSON already serialised (the
statement casts it), no Python-side type processing. Rows come back as plain dicts on
psycopg 3 (which decodes JSONB itself). With other drivers `rows()` and `execute()` go
through Core, whose result processing decodes what sqlite3 and psycopg2 leave as text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Connection, CursorResult, Executable
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import ValuesBase

Params = Mapping[str, Any] | Sequence[Mapping[Any, Any]]


class _Compiled:
    """The SQL text, the parameter names (in position order on SQLite), and the
    statement's own constants (a literal such as `depth + 1` becomes a bound parameter)."""

    def __init__(
        self, statement: ClauseElement, connection: Connection, keys: Sequence[str]
    ) -> None:
        compiled = statement.compile(dialect=connection.dialect, column_keys=list(keys))
        if not isinstance(compiled, SQLCompiler):
            raise ValueError("driver execution needs a SQL statement")
        self.statement = statement
        self.sql = str(compiled)
        if "POSTCOMPILE" in self.sql:
            raise ValueError("driver execution takes no expanding (IN) or literal parameters")
        self.positional = compiled.positional
        self.order = tuple((compiled.positiontup or ()) if self.positional else compiled.binds)
        self.constants = {
            name: bind.value
            for name, bind in compiled.binds.items()
            if name in self.order and bind.value is not None and not bind.required
        }
        # Columns left out of an INSERT (or UPDATE) whose default (onupdate) Python computes:
        # Core fills them in before it executes, and so does `row`.
        self.defaults = tuple(
            (column.key, default)
            for columns, attribute in (
                (compiled.insert_prefetch, "default"),
                (compiled.update_prefetch, "onupdate"),
            )
            for column in columns
            if (default := getattr(column, attribute)) is not None
        )
        # psycopg: a JSON parameter goes wrapped, as Core's JSONB binding does (None too:
        # Core binds it as JSON null).
        self.json = tuple(
            name
            for name, bind in compiled.binds.items()
            if not self.positional and isinstance(bind.type, JSON)
        )

    def row(self, params: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        if self.defaults:
            params = {**_computed(self.defaults, params), **params}
        if not self.positional:
            values = {**self.constants, **params}
            if self.json:
                from psycopg.types.json import Jsonb  # only psycopg's statements get here

                for name in self.json:
                    if name in values:
                        values[name] = Jsonb(values[name])
            return values
        constants = self.constants
        return tuple(constants[n] if n in constants else params[n] for n in self.order)


def _computed(defaults: Sequence[tuple[str, Any]], params: Mapping[str, Any]) -> dict[str, Any]:
    found = {}
    for key, default in defaults:
        if key not in params:
            # A callable default is wrapped by SQLAlchemy to take the execution context,
            # which none of the ledger's defaults (dict, list, a constant) reads.
            found[key] = default.arg if default.is_scalar else default.arg(None)
    return found


_compiled: dict[tuple[int, tuple[str, ...]], _Compiled] = {}


def _compile(connection: Connection, statement: object, params: Params) -> _Compiled:
    if not isinstance(statement, ClauseElement):
        raise TypeError(f"driver execution needs a SQL statement, not {statement!r}")
    # As Core does, an INSERT or UPDATE takes the columns its parameters name (an insert
    # built with no values writes the row it is given): compiled once per set of names.
    keys: tuple[str, ...] = ()
    if isinstance(statement, ValuesBase):
        first = params if isinstance(params, Mapping) else params[0]
        keys = tuple(sorted(first))
    found = _compiled.get((id(statement), keys))
    if found is None or found.statement is not statement:
        found = _compiled[(id(statement), keys)] = _Compiled(statement, connection, keys)
    return found


def run(connection: Connection, statement: Executable, params: Params) -> CursorResult[Any]:
    """SQLite: execute `statement` (one row of parameters, or several for executemany)
    through the driver-level path of Core (its events and errors, none of its typing)."""
    compiled = _compile(connection, statement, params)
    if isinstance(params, Mapping):
        return connection.exec_driver_sql(compiled.sql, compiled.row(params))
    return connection.exec_driver_sql(compiled.sql, [compiled.row(row) for row in params])


def rows(
    connection: Connection, statement: Executable, params: Mapping[str, Any]
) -> list[Mapping[Any, Any]]:
    """The statement's rows as mappings by column label: straight from psycopg 3, through
    Core on the other drivers."""
    if connection.dialect.driver != "psycopg":
        return list(connection.execute(statement, params).mappings())
    return _psycopg(connection, _compile(connection, statement, params), params, _dict_rows)[0]


def one_or_none(
    connection: Connection, statement: Executable, params: Mapping[str, Any]
) -> Mapping[Any, Any] | None:
    """The statement's one row, or None when it found none (more than one is an error)."""
    found = rows(connection, statement, params)
    if len(found) > 1:
        raise ValueError(f"expected at most one row, got {len(found)}")
    return found[0] if found else None


def execute(connection: Connection, statement: Executable, params: Mapping[str, Any]) -> int:
    """Run a statement that returns no rows (straight from psycopg 3, through Core on the
    other drivers); the number of rows it changed."""
    if connection.dialect.driver != "psycopg":
        return connection.execute(statement, params).rowcount
    return _psycopg(connection, _compile(connection, statement, params), params, None)[1]


def _dict_rows(cursor: Any) -> Callable[[Sequence[Any]], dict[str, Any]]:
    # psycopg's own dict_row builds a Column object per column per execution to learn the
    # names; the result's field names are all a row needs.
    result = cursor.pgresult
    names = [result.fname(i).decode() for i in range(result.nfields)] if result else []

    def make(values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(names, values, strict=True))

    return make


def _psycopg(
    connection: Connection,
    compiled: _Compiled,
    params: Mapping[str, Any],
    row_factory: Any,
) -> tuple[list[Mapping[Any, Any]], int]:
    pooled = connection.connection  # begins nothing: psycopg opens the transaction itself
    driver_connection = pooled.dbapi_connection
    assert driver_connection is not None
    cursor = (
        driver_connection.cursor(row_factory=row_factory)
        if row_factory is not None
        else driver_connection.cursor()
    )
    sql, values = compiled.sql, compiled.row(params)
    dispatch = connection.dispatch
    dispatch.before_cursor_execute(connection, cursor, sql, values, None, False)
    try:
        cursor.execute(sql, values)
        found: list[Mapping[Any, Any]] = list(cursor.fetchall()) if row_factory is not None else []
        rowcount = cursor.rowcount
    except BaseException as error:
        # Core's own handling, as its execute does: the error wrapped as Core raises it,
        # `handle_error` events, and on a lost connection the pool's connections dropped.
        # (A private method, so SQLAlchemy's major version is pinned.)
        connection._handle_dbapi_exception(error, sql, values, cursor, None)
    finally:
        cursor.close()
    dispatch.after_cursor_execute(connection, cursor, sql, values, None, False)
    return found, rowcount
