"""Statements built once per database dialect, on first use (ON CONFLICT is per dialect)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Column, Connection, Executable, Table, text

from nexus.ledger.repository._sql import upsert_insert


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


def insert_unless_present(
    table: Table,
    keys: Sequence[str],
    returning: Column[Any] | None = None,
    *,
    among: str | None = None,
) -> PerDialect:
    """An insert of the row given as parameters that does nothing when a row with the same
    `keys` exists (among the rows matching `among`, the predicate of a partial unique
    index); answering `returning` for the row it wrote (nothing when it wrote none)."""

    def build(connection: Connection) -> Executable:
        statement = upsert_insert(connection, table).on_conflict_do_nothing(
            index_elements=list(keys), index_where=None if among is None else text(among)
        )
        built: Executable = statement if returning is None else statement.returning(returning)
        return built

    return PerDialect(build)
