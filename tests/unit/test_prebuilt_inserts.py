"""Inserts built once take their rows by column name at execution, where a key that names
no column is dropped without a word: every field of the records they take is a column."""

from __future__ import annotations

from nexus.ledger.models import Session, table_of
from nexus.ledger.records import NewSession


def test_every_field_of_a_new_session_is_a_column_of_sessions() -> None:
    columns = {column.name for column in table_of(Session).c}
    assert set(NewSession.model_fields) <= columns, set(NewSession.model_fields) - columns
