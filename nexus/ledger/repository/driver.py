"""Hot statements on SQLite, compiled once and handed straight to the sqlite3 driver.

On the embedded mode's turn commit SQLAlchemy's per-execution work (parameter processing,
result setup, events) cost ~20 µs a statement, more than SQLite's own work for most of
them. The statements stay SQLAlchemy Core constructs, defined once in the repository; only
their execution skips the per-call layer. Parameters must be what sqlite3 accepts as they
are: JSON already serialised, no Python-side type processing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, CursorResult, Executable
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler


class _Compiled:
    """The SQL text, the parameter names in position order, and the statement's own
    constants (a literal such as `depth + 1` becomes a bound parameter too)."""

    def __init__(self, statement: ClauseElement, connection: Connection) -> None:
        compiled = statement.compile(dialect=connection.dialect)
        if not isinstance(compiled, SQLCompiler) or not compiled.positional:
            raise ValueError("driver execution needs a positional (SQLite) dialect")
        self.statement = statement
        self.sql = str(compiled)
        self.order = tuple(compiled.positiontup or ())
        self.constants = {
            name: bind.value
            for name, bind in compiled.binds.items()
            if name in self.order and bind.value is not None and not bind.required
        }

    def row(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        constants = self.constants
        return tuple(constants[n] if n in constants else params[n] for n in self.order)


_compiled: dict[int, _Compiled] = {}


def _compile(connection: Connection, statement: ClauseElement) -> _Compiled:
    found = _compiled.get(id(statement))
    if found is None or found.statement is not statement:
        found = _compiled[id(statement)] = _Compiled(statement, connection)
    return found


def run(
    connection: Connection,
    statement: Executable,
    params: Mapping[str, Any] | Sequence[Mapping[str, Any]],
) -> CursorResult[Any]:
    """Execute `statement` (one row of parameters, or several for executemany)."""
    assert isinstance(statement, ClauseElement)
    compiled = _compile(connection, statement)
    if isinstance(params, Mapping):
        return connection.exec_driver_sql(compiled.sql, compiled.row(params))
    return connection.exec_driver_sql(compiled.sql, [compiled.row(row) for row in params])
