"""Inserts built once take their rows by column name at execution, where a key that names
no column is dropped without a word: every field of the records they take is a column."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from nexus.ledger.models import Base, Delivery, Event, Session, table_of
from nexus.ledger.records import DeliveryDraft, EventDraft, NewSession


@pytest.mark.parametrize(
    ("record", "model"),
    [(NewSession, Session), (EventDraft, Event), (DeliveryDraft, Delivery)],
)
def test_every_field_of_a_row_inserted_by_name_is_a_column(
    record: type[BaseModel], model: type[Base]
) -> None:
    columns = {column.name for column in table_of(model).c}
    assert set(record.model_fields) <= columns, set(record.model_fields) - columns
