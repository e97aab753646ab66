"""Statements built once per database dialect, on first use (ON CONFLICT is per dialect)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Executable


class PerDialect:
    """A statement built by `build` for the first connection of each dialect, then reused:
    SQLAlchemy memoizes a reused statement's cache key, where a fresh one is traversed."""

    def __init__(self, build: Callable[[Connection], Executable]) -> None:
        self._build = build
        self._built: dict[str, Executable] = {}

    def __call__(self, connection: Connection) -> Executable:
        name = connection.dialect.name
        statement = self._built.get(name)
        if statement is None:
            # Two first uses racing each build one; they are the same statement.
            statement = self._built[name] = self._build(connection)
        return statement
