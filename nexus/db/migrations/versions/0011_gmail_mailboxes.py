"""Gmail mailboxes: the history watermark and the watch's expiry of each.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gmail_mailboxes",
        sa.Column("mailbox", sa.String(length=320), nullable=False),
        sa.Column("history_id", sa.BigInteger(), nullable=True),
        sa.Column("synced_at", sa.BigInteger(), nullable=True),
        sa.Column("watch_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("mailbox", name=op.f("pk_gmail_mailboxes")),
    )


def downgrade() -> None:
    op.drop_table("gmail_mailboxes")
