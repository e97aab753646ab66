"""Hot statements compiled once and handed straight to the driver (psycopg 3 or sqlite3).

SQLAlchemy's per-execution work (parameter processing, execution context, result metadata)
cost ~110 µs a statement on Postgres and ~20 µs on SQLite: more than the database's own
work for most of the statements a message runs. The statements stay Core constructs built
once in the repository; only their execution skips the per-call layer, and what that layer
did they still get here:

- the columns an INSERT or UPDATE names come from its parameters, and Python-side column
  defaults are filled in;
- JSON parameters are bound as Core binds them (psycopg's `Jsonb`, JSON text for sqlite3);
- the connection's `before_cursor_execute`/`after_cursor_execute` events fire, so whatever
  counts or logs statements (the counts benchmark, the tests) still sees each one;
- a driver error goes through Core's own handling: raised as SQLAlchemy's exception for it
  (`IntegrityError`, …), and a lost connection drops the pool's connections.

Rows come back as plain dicts from psycopg 3 (which decodes JSONB itself). `rows()` reads
through Core on the other drivers, whose JSON columns only Core's result processing
decodes; psycopg2 takes Core for everything. docs/ledger.md has the list of statements.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Connection, Executable
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import ValuesBase

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]]


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
        # A JSON parameter is bound as Core binds it: wrapped for psycopg (JSONB), as text
        # for sqlite3; None too, which Core binds as JSON null.
        self.json = tuple(
            name for name, bind in compiled.binds.items() if isinstance(bind.type, JSON)
        )
        self.json_value: Callable[[Any], Any] = json.dumps
        if connection.dialect.driver == "psycopg":
            from psycopg.types.json import Jsonb  # installed wherever this driver runs

            self.json_value = Jsonb

    def row(self, params: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        if self.defaults:
            params = {**_computed(self.defaults, params), **params}
        if self.json:
            params = {**params}
            for name in self.json:
                if name in params:
                    params[name] = self.json_value(params[name])
        if not self.positional:
            return {**self.constants, **params}
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


_compiled: dict[tuple[int, str, tuple[str, ...]], _Compiled] = {}


def _compile(connection: Connection, statement: object, params: Params) -> _Compiled:
    if not isinstance(statement, ClauseElement):
        raise TypeError(f"driver execution needs a SQL statement, not {statement!r}")
    # As Core does, an INSERT or UPDATE takes the columns its parameters name (an insert
    # built with no values writes the row it is given): compiled once per set of names.
    keys: tuple[str, ...] = ()
    if isinstance(statement, ValuesBase):
        first = params if isinstance(params, Mapping) else params[0]
        keys = tuple(sorted(first))
    # By driver too: a process (the tests) may run the same statement on several.
    key = (id(statement), connection.dialect.driver, keys)
    found = _compiled.get(key)
    if found is None or found.statement is not statement:
        found = _compiled[key] = _Compiled(statement, connection, keys)
    return found


def rows(
    connection: Connection, statement: Executable, params: Mapping[str, Any]
) -> list[Mapping[Any, Any]]:
    """The statement's rows as mappings by column label: straight from psycopg 3, through
    Core on the other drivers (whose JSON columns only Core's result processing decodes)."""
    if connection.dialect.driver != "psycopg":
        return list(connection.execute(statement, params).mappings())
    return _straight(connection, statement, params, _dict_rows)[0]


def one_or_none(
    connection: Connection, statement: Executable, params: Mapping[str, Any]
) -> Mapping[Any, Any] | None:
    """The statement's one row, or None when it found none (more than one is an error)."""
    found = rows(connection, statement, params)
    if len(found) > 1:
        raise ValueError(f"expected at most one row, got {len(found)}")
    return found[0] if found else None


def scalar(connection: Connection, statement: Executable, params: Mapping[str, Any]) -> Any:
    """The first column of the statement's first row (None when it found none), straight
    from psycopg 3 or sqlite3: for a column Core would not convert (text, a number)."""
    if connection.dialect.driver not in _STRAIGHT:
        return connection.execute(statement, params).scalar()
    found = _straight(connection, statement, params, _first_column)[0]
    return found[0] if found else None


def column(connection: Connection, statement: Executable, params: Mapping[str, Any]) -> list[Any]:
    """The first column of each of the statement's rows, straight from psycopg 3 or
    sqlite3: for a column Core would not convert (text, a number)."""
    if connection.dialect.driver not in _STRAIGHT:
        return list(connection.execute(statement, params).scalars())
    return _straight(connection, statement, params, _first_column)[0]


def execute(connection: Connection, statement: Executable, params: Params) -> int:
    """Run a statement that returns no rows, for one row of parameters or several (an
    executemany), straight from psycopg 3 or sqlite3; the number of rows it changed."""
    if connection.dialect.driver not in _STRAIGHT:
        return connection.execute(statement, params).rowcount
    return _straight(connection, statement, params, None)[1]


# The drivers these statements go straight to (SQLAlchemy's names for psycopg 3 and sqlite3).
_STRAIGHT = frozenset({"psycopg", "pysqlite"})


def _dict_rows(cursor: Any) -> Callable[[Sequence[Any]], dict[str, Any]]:
    # psycopg's own dict_row builds a Column object per column per execution to learn the
    # names; the result's field names are all a row needs.
    result = cursor.pgresult
    names = [result.fname(i).decode() for i in range(result.nfields)] if result else []

    def make(values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(names, values, strict=True))

    return make


def _first_column(_cursor: Any) -> Callable[[Sequence[Any]], Any]:
    return lambda values: values[0]


def _straight(
    connection: Connection, statement: Executable, params: Params, shape: Any
) -> tuple[list[Any], int]:
    """Execute on the connection's driver cursor; `shape` makes a psycopg row (None: the
    statement answers no rows). Returns the rows and the row count."""
    compiled = _compile(connection, statement, params)
    values: Any
    if isinstance(params, Mapping):
        many, values = False, compiled.row(params)
    else:
        many, values = True, [compiled.row(row) for row in params]
    sql = compiled.sql
    # Checking out the driver connection begins nothing: the driver opens the transaction
    # (psycopg), or the unit of work's BEGIN already has (SQLite).
    driver_connection = connection.connection.dbapi_connection
    assert driver_connection is not None
    psycopg = connection.dialect.driver == "psycopg"
    cursor = (
        driver_connection.cursor(row_factory=shape)
        if psycopg and shape is not None
        else driver_connection.cursor()
    )
    dispatch = connection.dispatch
    dispatch.before_cursor_execute(connection, cursor, sql, values, None, many)
    try:
        if many:
            cursor.executemany(sql, values)
        else:
            cursor.execute(sql, values)
        found: list[Any] = []
        if shape is not None:
            found = list(cursor.fetchall())
            if not psycopg:
                found = [row[0] for row in found] if shape is _first_column else found
        rowcount = cursor.rowcount
    except BaseException as error:
        # Core's own handling, as its execute does: the error wrapped as Core raises it,
        # `handle_error` events, and on a lost connection the pool's connections dropped.
        # (A private method, so SQLAlchemy's major version is pinned.)
        connection._handle_dbapi_exception(error, sql, values, cursor, None)
    finally:
        cursor.close()
    dispatch.after_cursor_execute(connection, cursor, sql, values, None, many)
    return found, rowcount
