"""Hook evaluation as an obligation written with the event, discharged once per hook.

`events.hooks_status` is `due` from the moment an event that owes the hooks an evaluation
is stored (in the same statement), and `done` once every hook that applies to it has its
invocation; NULL when it owes nothing. A partial index holds only the due events, which
the relay reads. Events already stored owe nothing, except those still waiting for the
router (their hooks would have run after routing): they become due if a hook is enabled.

`hook_invocations` gets one row per (event, hook) at most: a unique index, which also
serves the lookups by event the plain index on `event_id` served (dropped). Should two
rows already exist for one event and hook (two runs of the same event), the first is kept.

Columns and indexes are only added (no SQLite rebuild), so the metric triggers on `events`
stay.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DUE = "hooks_status = 'due'"
_VALUES = "hooks_status IN ('due', 'done')"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.add_column("events", sa.Column("hooks_status", sa.String(length=8), nullable=True))
        op.create_check_constraint(op.f("ck_events_hooks_status"), "events", _VALUES)
    else:
        # SQLite adds no constraint to a table in place: the column carries its own CHECK.
        op.add_column(
            "events",
            sa.Column(
                "hooks_status",
                sa.String(length=8),
                sa.CheckConstraint(_VALUES, name=op.f("ck_events_hooks_status")),
                nullable=True,
            ),
        )
    bind.execute(
        sa.text(
            "UPDATE events SET hooks_status = 'due' WHERE status = 'received' "
            "AND direction = 'inbound' AND adapter <> 'hook' "
            "AND EXISTS (SELECT 1 FROM hooks WHERE enabled)"
        )
    )
    op.create_index(
        "ix_events_hooks_due",
        "events",
        ["received_at", "id"],
        unique=False,
        postgresql_where=sa.text(_DUE),
        sqlite_where=sa.text(_DUE),
    )
    bind.execute(
        sa.text(
            "DELETE FROM hook_invocations WHERE event_id IS NOT NULL AND id NOT IN "
            "(SELECT MIN(id) FROM hook_invocations WHERE event_id IS NOT NULL "
            "GROUP BY event_id, hook_name)"
        )
    )
    op.drop_index("ix_hook_invocations_event_id", table_name="hook_invocations")
    op.create_index(
        "ux_hook_invocations_event_id_hook_name",
        "hook_invocations",
        ["event_id", "hook_name"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("ux_hook_invocations_event_id_hook_name", table_name="hook_invocations")
    op.create_index("ix_hook_invocations_event_id", "hook_invocations", ["event_id"], unique=False)
    op.drop_index("ix_events_hooks_due", table_name="events")
    # In place on both (SQLite 3.35+; the column's own CHECK goes with it): no rebuild.
    op.execute("ALTER TABLE events DROP COLUMN hooks_status")
