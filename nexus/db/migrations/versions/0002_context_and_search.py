"""Context size per turn, and full-text search over message text for smart routing.

`turns.context_tokens` is the size of the context right after the turn, measured by the
model's last call (its input plus its output), so the next turn's budget is exact instead
of estimated. Search is a GIN expression index on Postgres and an FTS5 table kept by
triggers on SQLite; both index the `text` of user and assistant messages only.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE_UP = (
    "CREATE VIRTUAL TABLE messages_fts USING fts5(text, turn_id UNINDEXED, tokenize='porter')",
    """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
       WHEN NEW.role IN ('user', 'assistant') AND json_extract(NEW.content, '$.text') IS NOT NULL
       BEGIN
         INSERT INTO messages_fts (rowid, text, turn_id)
         VALUES (NEW.rowid, json_extract(NEW.content, '$.text'), NEW.turn_id);
       END""",
    # Messages are append-only, but an operator's manual cleanup must not leave stale hits.
    """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
       BEGIN DELETE FROM messages_fts WHERE rowid = OLD.rowid; END""",
)
_POSTGRES_UP = (
    """CREATE INDEX ix_messages_search ON messages
       USING gin (to_tsvector('english', coalesce(content->>'text', '')))
       WHERE role IN ('user', 'assistant')""",
)


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.add_column(sa.Column("context_tokens", sa.Integer(), nullable=True))
    dialect = op.get_bind().dialect.name
    for statement in _SQLITE_UP if dialect == "sqlite" else _POSTGRES_UP:
        op.execute(statement)
    if dialect == "sqlite":
        op.execute(
            "INSERT INTO messages_fts (rowid, text, turn_id) "
            "SELECT rowid, json_extract(content, '$.text'), turn_id FROM messages "
            "WHERE role IN ('user', 'assistant') AND json_extract(content, '$.text') IS NOT NULL"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS messages_fts_delete")
        op.execute("DROP TRIGGER IF EXISTS messages_fts_insert")
        op.execute("DROP TABLE IF EXISTS messages_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_messages_search")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("context_tokens")
