"""The base of every ledger record."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """A ledger record: frozen, and it refuses fields it does not name."""

    model_config = ConfigDict(frozen=True, extra="forbid")
