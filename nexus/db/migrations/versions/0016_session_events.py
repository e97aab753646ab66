"""Session events kept in the ledger: what the SSE stream sent for each committed turn.

`session_events` is append-only (no code path updates or deletes a row): a turn's events are
written by its commit, in one multi-row INSERT, numbered per session from 1 (`sequence`).
The unique (session_id, sequence) index orders them and refuses a second writer of a number.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_events",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("session_id", sa.String(length=26), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("turn_id", sa.String(length=26), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_events_session_id_sessions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_events")),
    )
    op.create_index(
        "uq_session_events_session_id_sequence",
        "session_events",
        ["session_id", "sequence"],
        unique=True,
    )
    op.create_index("ix_session_events_turn_id", "session_events", ["turn_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_session_events_turn_id", table_name="session_events")
    op.drop_index("uq_session_events_session_id_sequence", table_name="session_events")
    op.drop_table("session_events")
