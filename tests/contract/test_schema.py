"""The migration builds exactly the schema the models describe, on both databases."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from nexus.db import Database
from nexus.db.migrate import alembic_config, current_revision, head_revision, upgrade
from nexus.ledger.models import metadata
from nexus.ledger.records import ContextRead
from tests.support import build_chain, new_session

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
        return name not in {"ix_messages_search", "ix_events_search"}
    fts = ("messages_fts", "events_fts")
    return not (kind == "table" and name is not None and name.startswith(fts))


def test_migrated_schema_matches_the_models(database: Database) -> None:
    with database.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "include_name": _not_search_machinery}
        )
        assert compare_metadata(context, metadata) == []


def test_every_public_table_exists_at_head(database: Database) -> None:
    assert set(inspect(database.engine).get_table_names()) >= PUBLIC_TABLES
    assert current_revision(database.engine) == head_revision()


def _unpriced(context: ContextRead) -> ContextRead:
    """The context without the turns' prices: migrating up through 0008 prices turns that
    were committed without one (that is its job), and nothing else may change."""
    cleared = {"cost_micros": None, "price_version": None}
    turns = tuple(
        view.model_copy(update={"turn": view.turn.model_copy(update=cleared)})
        for view in context.turns
    )
    return context.model_copy(update={"turns": turns})


def test_migration_0004_keeps_every_row_and_rebuilds_sqlite_tables_by_key(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'nexus.db'}"
    upgrade(url)
    database = Database(url)
    try:
        with database.unit_of_work() as uow:  # written at head: today's code writes today's
            session = new_session(uow.ledger)
            chain = build_chain(uow.ledger, session, 12, compact_every=5, keep=2)
            uow.commit()
        # Read at head: today's code reads today's columns, which 0003 may not have yet.
        with database.unit_of_work() as uow:
            before = uow.ledger.threads.read_context(chain[-1])
            moves = uow.ledger.sessions.history(session.id)
        database.close()
        command.downgrade(alembic_config(url), "0003")
        upgrade(url)
        with database.unit_of_work() as uow:
            after = uow.ledger.threads.read_context(chain[-1])
            assert uow.ledger.sessions.history(session.id) == moves
            tables = {
                name: sql
                for name, sql in uow.connection.exec_driver_sql(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
                )
            }
        assert _unpriced(after) == _unpriced(before) and len(moves) == 13
        assert tables["threads"].rstrip().endswith("WITHOUT ROWID")
        assert tables["session_history"].rstrip().endswith("WITHOUT ROWID")
        database.close()
        command.downgrade(alembic_config(url), "0003")  # and back, rows intact
        upgrade(url)
        with database.unit_of_work() as uow:
            assert _unpriced(uow.ledger.threads.read_context(chain[-1])) == _unpriced(before)
    finally:
        database.close()


def test_migration_0005_records_each_sessions_first_turn(database: Database) -> None:
    """Commits set `root_turn_id` once; the migration fills it in for sessions it finds."""
    with database.unit_of_work() as uow:
        session = new_session(uow.ledger)
        chain = build_chain(uow.ledger, session, 4, compact_every=None, keep=0)
        empty = new_session(uow.ledger, "empty")
        uow.commit()
    with database.unit_of_work() as uow:
        found = uow.ledger.sessions.get(session.id)
        assert found is not None and found.root_turn_id == chain[0]
        uow.connection.exec_driver_sql("UPDATE sessions SET root_turn_id = NULL")
        uow.commit()
    url = database.engine.url.render_as_string(hide_password=False)
    database.close()
    command.downgrade(alembic_config(url), "0004")
    upgrade(url)
    with database.unit_of_work() as uow:
        refilled = uow.ledger.sessions.get(session.id)
        untouched = uow.ledger.sessions.get(empty.id)
    assert refilled is not None and refilled.root_turn_id == chain[0]
    assert untouched is not None and untouched.root_turn_id is None
