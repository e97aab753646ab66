"""Fewer trees written per turn: two unused indexes go; SQLite keeps two tables by key.

A turn commit writes a row into `turns`, `messages`, `threads` and `session_history`, and
every index on those tables is one more B-tree page touched per turn. Two of them served
no query: `ix_threads_parent_turn_id` (context reads climb threads by primary key) and
`ix_messages_event_id` (an event's answer is found through `queue_items`). On SQLite,
`threads` and `session_history` become WITHOUT ROWID tables, stored in their primary key's
B-tree instead of a rowid tree plus a key index. The embedded ledger benchmark's commit
cost fell by about a tenth.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEYED_ON_SQLITE = ("threads", "session_history")


def upgrade() -> None:
    op.drop_index("ix_threads_parent_turn_id", table_name="threads")
    op.drop_index("ix_messages_event_id", table_name="messages")
    if op.get_bind().dialect.name == "sqlite":
        for table in _KEYED_ON_SQLITE:
            with op.batch_alter_table(
                table, recreate="always", table_kwargs={"sqlite_with_rowid": False}
            ):
                pass


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for table in _KEYED_ON_SQLITE:
            with op.batch_alter_table(table, recreate="always"):
                pass
    op.create_index("ix_messages_event_id", "messages", ["event_id"], unique=False)
    op.create_index("ix_threads_parent_turn_id", "threads", ["parent_turn_id"], unique=False)
