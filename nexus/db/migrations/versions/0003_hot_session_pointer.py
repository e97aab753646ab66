"""Drop the index on `sessions.updated_at`, so a turn's pointer move is a HOT update.

Every turn commit updates its session row (`thread_id`, `updated_at`). With `updated_at`
indexed, Postgres cannot update the row in place (a heap-only tuple) and writes a new entry
into every index of `sessions` on every turn. Nothing reads sessions by `updated_at`; the
index only cost writes (the ledger benchmark's commit rate rose by about a tenth without it).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_sessions_updated_at", table_name="sessions")


def downgrade() -> None:
    op.create_index("ix_sessions_updated_at", "sessions", ["updated_at"], unique=False)
