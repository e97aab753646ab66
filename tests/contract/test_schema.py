"""The migration builds exactly the schema the models describe, on both databases."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from nexus.db import Database
from nexus.db.migrate import current_revision, head_revision
from nexus.ledger.models import metadata

PUBLIC_TABLES = {
    "events",
    "contacts",
    "entities",
    "agents",
    "capabilities",
    "agent_capabilities",
    "sessions",
    "session_aliases",
    "session_history",
    "turns",
    "threads",
    "messages",
    "tool_calls",
    "compactions",
    "queue_items",
    "hooks",
    "hook_invocations",
    "deliveries",
    "timer_state",
}


def _not_search_machinery(name: str | None, kind: str, parent: object) -> bool:
    """Full-text search plumbing the models don't map: SQLite's FTS5 tables, Postgres' index."""
    if kind == "index":
        return name != "ix_messages_search"
    return not (kind == "table" and name is not None and name.startswith("messages_fts"))


def test_migrated_schema_matches_the_models(database: Database) -> None:
    with database.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "include_name": _not_search_machinery}
        )
        assert compare_metadata(context, metadata) == []


def test_every_public_table_exists_at_head(database: Database) -> None:
    assert set(inspect(database.engine).get_table_names()) >= PUBLIC_TABLES
    assert current_revision(database.engine) == head_revision()
