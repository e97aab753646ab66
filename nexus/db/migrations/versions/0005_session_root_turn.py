"""Sessions record their first turn (`root_turn_id`), filled from the history.

A session's root is the first turn committed in it: its own first turn, for a fork too
(what it forked from is in `session_history`). Turn commits set it once (the head move's
UPDATE keeps it when it is set), so it costs no statement of its own.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # No foreign key: only a turn commit writes it, with the turn it commits. (SQLite could
    # add one only by rebuilding `sessions`, which the tables that reference it forbid.)
    op.add_column("sessions", sa.Column("root_turn_id", sa.String(length=26), nullable=True))
    # The shallowest turn of each session's own chain is its first.
    op.execute(
        """
        UPDATE sessions SET root_turn_id = (
            SELECT threads.turn_id FROM threads
            JOIN turns ON turns.id = threads.turn_id
            WHERE turns.session_id = sessions.id
            ORDER BY threads.depth, turns.started_at
            LIMIT 1
        )
        """
    )


def downgrade() -> None:
    op.drop_column("sessions", "root_turn_id")
