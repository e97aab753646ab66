"""Small SQL helpers shared by the repositories: dialect-aware inserts and row mapping."""

from __future__ import annotations

import zlib
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import Column, ColumnElement, Connection, Table, and_, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite

R = TypeVar("R", bound=BaseModel)


def upsert_insert(connection: Connection, table: Table) -> Any:
    """An INSERT that supports ON CONFLICT on both Postgres and SQLite."""
    if connection.dialect.name == "postgresql":
        return postgresql.insert(table)
    if connection.dialect.name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect {connection.dialect.name!r}")


def serialize(connection: Connection, name: str) -> None:
    """Hold the lock called `name` until the transaction ends: writers of one kind take
    turns. Postgres: a transaction-scoped advisory lock. SQLite needs none: its writers
    are one at a time already (every transaction begins IMMEDIATE)."""
    if connection.dialect.name == "postgresql":
        key = zlib.crc32(name.encode())  # a stable 32-bit number: the lock's name
        connection.execute(select(func.pg_advisory_xact_lock(key)))


def past_key(
    first: ColumnElement[Any],
    second: ColumnElement[Any],
    key: tuple[Any, Any],
    *,
    descending: bool = False,
) -> ColumnElement[bool]:
    """Where a keyset page goes on: the rows after `key` in (first, second) order, or
    before it when the page runs newest first."""
    value, tie = key
    if descending:
        return or_(first < value, and_(first == value, second < tie))
    return or_(first > value, and_(first == value, second > tie))


def columns_for(table: Table, record: type[BaseModel]) -> list[Column[Any]]:
    """The table's columns named like the record's fields, in field order."""
    return [table.c[name] for name in record.model_fields]


def to_record(record: type[R], row: Any) -> R:
    return record.model_validate(dict(row._mapping))


def one_record(
    connection: Connection, table: Table, record: type[R], condition: ColumnElement[bool]
) -> R | None:
    """The one row of `table` that meets `condition`, as a `record`; None when there is none."""
    row = connection.execute(select(*columns_for(table, record)).where(condition)).one_or_none()
    return None if row is None else to_record(record, row)
