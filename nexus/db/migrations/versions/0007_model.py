"""Model configuration per persona, session and turn, and the event that asked for it.

The persona's defaults were already stored (`agents.model_config`, never read); they are
renamed `default_model_config`, the name the API gives them. A session's own overrides,
an event's per-turn overrides and the configuration a turn actually ran with are new
nullable JSON columns. Columns are only added or renamed in place (no SQLite rebuild), so
the metric triggers on `events` and `turns` stay.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW = (("sessions", "model_overrides"), ("events", "model_overrides"), ("turns", "model_settings"))


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    # RENAME COLUMN is plain SQL on both Postgres and SQLite (3.25+): no table rebuild.
    op.execute("ALTER TABLE agents RENAME COLUMN model_config TO default_model_config")
    for table, column in _NEW:
        op.add_column(table, sa.Column(column, _json(), nullable=True))


def downgrade() -> None:
    for table, column in reversed(_NEW):
        op.drop_column(table, column)
    op.execute("ALTER TABLE agents RENAME COLUMN default_model_config TO model_config")
