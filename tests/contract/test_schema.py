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


def test_migrated_schema_matches_the_models(database: Database) -> None:
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []


def test_every_public_table_exists_at_head(database: Database) -> None:
    assert set(inspect(database.engine).get_table_names()) >= PUBLIC_TABLES
    assert current_revision(database.engine) == head_revision()
