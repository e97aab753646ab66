"""Declarative base and the column types every ledger table shares."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, MetaData, Table
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase

# Deterministic constraint names keep Alembic migrations identical on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# JSONB on Postgres (indexable, compact), plain JSON text on SQLite.
JsonColumn = JSON().with_variant(JSONB(), "postgresql")

# Every timestamp in the ledger is Unix milliseconds (docs/ledger.md): one unit,
# comparable in SQL on both databases, and free of time-zone surprises.
Millis = BigInteger


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: dict[Any, Any] = {dict[str, Any]: JsonColumn, list[Any]: JsonColumn}


def one_of(column: str, values: Iterable[StrEnum], name: str | None = None) -> CheckConstraint:
    """A CHECK constraint limiting a text column to an enum's values."""
    allowed = ", ".join(f"'{value.value}'" for value in values)
    return CheckConstraint(f"{column} IN ({allowed})", name=name or column)


def table_of(model: type[Base]) -> Table:
    """The Core table behind a model, typed as a Table (SQLAlchemy types it more loosely)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table
