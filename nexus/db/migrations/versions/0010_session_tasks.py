"""Tasks an agent dispatches to a session it did not spawn as a worker (`session_tasks`).

`agent_send` with a `session` target (an existing session) or a `fork` target (a fork it
makes) records the task here, keyed by the event that carries it, so the serving session's
answer to that event goes back to the caller as a `worker_result`, and the caller's
`GET /v1/sessions/{label}/workers` lists it beside the workers it spawned. A spawned
worker keeps its task on its own session row, as before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_tasks",
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("caller_session_label", sa.String(length=512), nullable=False),
        sa.Column("caller_turn_id", sa.String(length=26), nullable=False),
        sa.Column("tool_call_id", sa.String(length=26), nullable=True),
        sa.Column("session_id", sa.String(length=26), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("task_status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("kind IN ('session', 'fork')", name=op.f("ck_session_tasks_kind")),
        sa.CheckConstraint(
            "task_status IN ('pending', 'running', 'completed', 'failed', 'cancelled')",
            name=op.f("ck_session_tasks_task_status"),
        ),
        sa.ForeignKeyConstraint(
            ["caller_turn_id"], ["turns.id"], name=op.f("fk_session_tasks_caller_turn_id_turns")
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_session_tasks_event_id_events")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_session_tasks_session_id_sessions")
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_session_tasks")),
    )
    op.create_index(
        "ix_session_tasks_caller_session_label",
        "session_tasks",
        ["caller_session_label", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_session_tasks_caller_session_label", table_name="session_tasks")
    op.drop_table("session_tasks")
