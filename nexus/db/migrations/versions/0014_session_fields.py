"""Sessions get a title, tags, start and finish times; a deleted session frees its label.

`title`, `tags` (a JSON list of strings), `started_at` (the first turn's start) and
`finished_at` (a worker's task ended, or the session was archived or deleted) are nullable
columns. `routing_key` gets an index (`updated_at` has one since 0001).

Deleting a session is a status (`deleted`): its rows stay in the ledger, and its label is
free for a new session. A label is unique among sessions that are not deleted: the table-wide
UNIQUE constraint becomes a partial unique index, with a plain index on `label` beside it for
lookups that include deleted sessions. An alias keeps naming a label, not a row, so its
foreign key to `sessions.label` (which a partial index cannot back) goes.

SQLite cannot drop a constraint in place: `sessions` and `session_aliases` are rebuilt with
foreign keys off (the procedure SQLite documents for schema changes), so the tables that
reference `sessions` keep their keys, and the triggers that read it stay.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LIVE = "status <> 'deleted'"
_ON_CHAIN = "status IN ('completed', 'aborted')"
_CHAIN_CHILD = f"{_ON_CHAIN} AND parent_turn_id IS NOT NULL AND abandoned_at IS NULL"
_LABEL_UNIQUE = re.compile(r",\s*CONSTRAINT uq_sessions_label UNIQUE \(label\)")
_ALIAS_FK = re.compile(
    r",\s*CONSTRAINT fk_session_aliases_session_label_sessions FOREIGN KEY\(session_label\)"
    r" REFERENCES sessions \(label\)"
)


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.add_column("sessions", sa.Column("title", sa.Text(), nullable=True))
    op.add_column("sessions", sa.Column("tags", _json(), nullable=True))
    op.add_column("sessions", sa.Column("started_at", sa.BigInteger(), nullable=True))
    op.add_column("sessions", sa.Column("finished_at", sa.BigInteger(), nullable=True))
    op.create_index("ix_sessions_routing_key", "sessions", ["routing_key"], unique=False)
    # A rollback's abandoned turns: kept, off the chain, so a new turn may extend the turn
    # the session went back to.
    op.add_column("turns", sa.Column("abandoned_at", sa.BigInteger(), nullable=True))
    op.drop_index("uq_turns_chain_child", table_name="turns")
    op.create_index(
        "uq_turns_chain_child",
        "turns",
        ["session_id", "parent_turn_id"],
        unique=True,
        postgresql_where=sa.text(_CHAIN_CHILD),
        sqlite_where=sa.text(_CHAIN_CHILD),
    )
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        # IF EXISTS: a downgrade leaves them dropped (see there).
        op.execute(
            "ALTER TABLE session_aliases DROP CONSTRAINT IF EXISTS "
            "fk_session_aliases_session_label_sessions"
        )
        op.execute("ALTER TABLE sessions DROP CONSTRAINT IF EXISTS uq_sessions_label")
    else:
        with op.get_context().autocommit_block():
            bind.exec_driver_sql("PRAGMA foreign_keys=OFF")
        try:
            _rebuild_sqlite(bind, "session_aliases", _ALIAS_FK)
            _rebuild_sqlite(bind, "sessions", _LABEL_UNIQUE)
            broken = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"rows lost their keys in the rebuild: {broken[:5]}")
        finally:
            with op.get_context().autocommit_block():
                bind.exec_driver_sql("PRAGMA foreign_keys=ON")
    op.create_index("ix_sessions_label", "sessions", ["label"], unique=False)
    op.create_index(
        "ux_sessions_live_label",
        "sessions",
        ["label"],
        unique=True,
        postgresql_where=sa.text(_LIVE),
        sqlite_where=sa.text(_LIVE),
    )
    # The first turn's start, for sessions that have turns already. Last: on Postgres the
    # update queues the deferred key check on `sessions`, which forbids indexing it after.
    op.execute(
        "UPDATE sessions SET started_at = "
        "(SELECT MIN(turns.started_at) FROM turns WHERE turns.session_id = sessions.id)"
    )


def _rebuild_sqlite(bind: sa.Connection, table: str, drop: re.Pattern[str]) -> None:
    """Rebuild `table` without the clause `drop` matches (if it has it): a copy under a new
    name, the rows, then the copy takes the name. Renamed the legacy way, so the triggers that read the table
    are not re-checked while it is away; the indexes are created again from their SQL."""
    create = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).scalar_one()
    indexes = [
        sql
        for (sql,) in bind.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
            "AND sql IS NOT NULL",
            (table,),
        )
    ]
    rebuilt, found = drop.subn("", create)
    if not found:
        return  # dropped before (a downgrade leaves it dropped): nothing to rebuild
    rebuilt = rebuilt.replace(f"CREATE TABLE {table} ", f"CREATE TABLE {table}_0014 ", 1)
    bind.exec_driver_sql("PRAGMA legacy_alter_table=ON")
    try:
        bind.exec_driver_sql(rebuilt)
        # `table` is one of this module's two names; the copy has the same columns in order.
        bind.exec_driver_sql(f"INSERT INTO {table}_0014 SELECT * FROM {table}")  # noqa: S608
        bind.exec_driver_sql(f"DROP TABLE {table}")
        bind.exec_driver_sql(f"ALTER TABLE {table}_0014 RENAME TO {table}")
    finally:
        bind.exec_driver_sql("PRAGMA legacy_alter_table=OFF")
    for sql in indexes:
        bind.exec_driver_sql(sql)


def downgrade() -> None:
    op.drop_index("ux_sessions_live_label", table_name="sessions")
    op.drop_index("ix_sessions_label", table_name="sessions")
    op.drop_index("ix_sessions_routing_key", table_name="sessions")
    op.drop_index("uq_turns_chain_child", table_name="turns")
    op.create_index(
        "uq_turns_chain_child",
        "turns",
        ["session_id", "parent_turn_id"],
        unique=True,
        postgresql_where=sa.text(f"{_ON_CHAIN} AND parent_turn_id IS NOT NULL"),
        sqlite_where=sa.text(f"{_ON_CHAIN} AND parent_turn_id IS NOT NULL"),
    )
    op.drop_column("turns", "abandoned_at")
    for column in ("finished_at", "started_at", "tags", "title"):
        op.drop_column("sessions", column)
    # The label's table-wide uniqueness and the alias key are not restored: deleted sessions
    # may share labels by now.
