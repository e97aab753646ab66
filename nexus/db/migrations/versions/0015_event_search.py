"""Full-text search over inbound events' text, for hooks' `ctx.search_events`.

Postgres: a GIN expression index over `to_tsvector('simple', coalesce(text, ''))`, partial
on inbound events (the only ones searched). SQLite: an FTS5 table `events_fts` (the text
and the event's id), filled from the events already stored and kept in step by a trigger
on insert (events are append-only; a row whose event is gone matches nothing, since
search joins back to `events` by id). The 'simple' configuration and FTS5's unicode61
tokenizer without diacritic folding both split on what is not a letter or digit and fold
case, with no stemming, so a word matches the same events on both.

The index maintenance rides with the statement that stores an event: no statement is
added to the hot path.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_POSTGRES_UP = """
    CREATE INDEX ix_events_search ON events
    USING gin (to_tsvector('simple', coalesce(text, '')))
    WHERE direction = 'inbound'
"""
_SQLITE_UP = (
    "CREATE VIRTUAL TABLE events_fts USING fts5("
    "text, event_id UNINDEXED, tokenize = 'unicode61 remove_diacritics 0')",
    """CREATE TRIGGER events_fts_insert AFTER INSERT ON events
       WHEN NEW.direction = 'inbound' AND NEW.text IS NOT NULL
       BEGIN
         INSERT INTO events_fts (text, event_id) VALUES (NEW.text, NEW.id);
       END""",
    "INSERT INTO events_fts (text, event_id) SELECT text, id FROM events "
    "WHERE direction = 'inbound' AND text IS NOT NULL ORDER BY received_at, id",
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute(_POSTGRES_UP)
        return
    _require_fts5(bind)
    for statement in _SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_events_search")
        return
    op.execute("DROP TRIGGER IF EXISTS events_fts_insert")
    op.execute("DROP TABLE IF EXISTS events_fts")


def _require_fts5(bind: sa.Connection) -> None:
    """Say what is missing when this SQLite was built without FTS5, not 'no such module'."""
    compiled = {row[0] for row in bind.exec_driver_sql("PRAGMA compile_options")}
    if "ENABLE_FTS5" not in compiled:
        try:
            bind.exec_driver_sql("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
            bind.exec_driver_sql("DROP TABLE temp.fts5_probe")
        except sa.exc.OperationalError as error:
            raise RuntimeError(
                "this SQLite has no FTS5, which event search needs: use a Python whose "
                "sqlite3 is built with it (SQLITE_ENABLE_FTS5), or Postgres"
            ) from error
