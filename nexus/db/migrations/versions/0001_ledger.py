"""The ledger: its first nineteen tables (docs/ledger.md, "Tables").

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("system_prompt", sa.Text(), nullable=False),
        sa.Column("emoji", sa.String(length=16), nullable=True),
        sa.Column("default_model", sa.String(length=255), nullable=True),
        sa.Column(
            "model_config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "permissions",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "tags",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("status IN ('active', 'archived')", name=op.f("ck_agents_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("name", name=op.f("uq_agents_name")),
    )
    op.create_table(
        "capabilities",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("icon", sa.String(length=64), nullable=True),
        sa.Column("category", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_capabilities")),
    )
    op.create_table(
        "entities",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("merged_into", sa.String(length=64), nullable=True),
        sa.Column(
            "tags",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("is_owner", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["merged_into"], ["entities.id"], name=op.f("fk_entities_merged_into_entities")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_entities")),
    )
    op.create_index("ix_entities_merged_into", "entities", ["merged_into"], unique=False)
    op.create_table(
        "hooks",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("schedule", sa.String(length=128), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=True),
        sa.Column("breaker_state", sa.String(length=16), nullable=False),
        sa.Column("consecutive_errors", sa.Integer(), nullable=False),
        sa.Column("opened_at", sa.BigInteger(), nullable=True),
        sa.Column(
            "state",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("last_fired_at", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "breaker_state IN ('closed', 'open', 'half_open')", name=op.f("ck_hooks_breaker_state")
        ),
        sa.CheckConstraint("mode IN ('persistent', 'one-shot')", name=op.f("ck_hooks_mode")),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_hooks")),
    )
    op.create_table(
        "timer_state",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("last_minute", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_timer_state")),
    )
    op.create_table(
        "agent_capabilities",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("agent_id", sa.String(length=26), nullable=False),
        sa.Column("capability_id", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_agent_capabilities_agent_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["capability_id"],
            ["capabilities.id"],
            name=op.f("fk_agent_capabilities_capability_id_capabilities"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_capabilities")),
        sa.UniqueConstraint(
            "agent_id", "capability_id", name=op.f("uq_agent_capabilities_agent_id_capability_id")
        ),
    )
    op.create_table(
        "contacts",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("platform", sa.String(length=64), nullable=False),
        sa.Column("sender_id", sa.String(length=255), nullable=False),
        sa.Column("entity_id", sa.String(length=64), nullable=False),
        sa.Column("display_name", sa.Text(), nullable=True),
        sa.Column("first_seen_at", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["entity_id"], ["entities.id"], name=op.f("fk_contacts_entity_id_entities")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_contacts")),
        sa.UniqueConstraint("platform", "sender_id", name=op.f("uq_contacts_platform_sender_id")),
    )
    op.create_table(
        "hook_invocations",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("hook_name", sa.String(length=255), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("fired", sa.Boolean(), nullable=False),
        sa.Column(
            "result",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["hook_name"], ["hooks.name"], name=op.f("fk_hook_invocations_hook_name_hooks")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hook_invocations")),
    )
    op.create_index("ix_hook_invocations_event_id", "hook_invocations", ["event_id"], unique=False)
    op.create_index(
        "ix_hook_invocations_hook_name_started_at",
        "hook_invocations",
        ["hook_name", "started_at"],
        unique=False,
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("label", sa.String(length=512), nullable=False),
        sa.Column("persona_id", sa.String(length=26), nullable=False),
        sa.Column("routing_key", sa.String(length=512), nullable=True),
        sa.Column("thread_id", sa.String(length=26), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("source_event_id", sa.String(length=255), nullable=True),
        sa.Column("is_subagent", sa.Boolean(), nullable=False),
        sa.Column("parent_session_label", sa.String(length=512), nullable=True),
        sa.Column("parent_turn_id", sa.String(length=26), nullable=True),
        sa.Column("spawn_tool_call_id", sa.String(length=26), nullable=True),
        sa.Column("task_description", sa.Text(), nullable=True),
        sa.Column("task_status", sa.String(length=16), nullable=True),
        sa.Column("queue_mode", sa.String(length=16), nullable=True),
        sa.Column("queue_cap", sa.Integer(), nullable=True),
        sa.Column("drop_policy", sa.String(length=16), nullable=True),
        sa.Column("debounce_ms", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "origin IN ('user', 'system', 'subagent', 'fork')", name=op.f("ck_sessions_origin")
        ),
        sa.CheckConstraint(
            "queue_mode IN ('interrupt', 'steer', 'steer-backlog', 'followup', 'collect', 'queue')",
            name=op.f("ck_sessions_queue_mode"),
        ),
        sa.CheckConstraint(
            "status IN ('active', 'archived', 'deleted')", name=op.f("ck_sessions_status")
        ),
        sa.ForeignKeyConstraint(
            ["parent_turn_id"],
            ["turns.id"],
            name="fk_sessions_parent_turn_id_turns",
            use_alter=True,
        ),
        sa.ForeignKeyConstraint(
            ["persona_id"], ["agents.id"], name=op.f("fk_sessions_persona_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["turns.id"],
            name="fk_sessions_thread_id_turns",
            use_alter=True,
            deferrable=True,
            initially="DEFERRED",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
        sa.UniqueConstraint("label", name=op.f("uq_sessions_label")),
    )
    op.create_index(
        "ix_sessions_parent_session_label", "sessions", ["parent_session_label"], unique=False
    )
    op.create_index("ix_sessions_persona_id", "sessions", ["persona_id"], unique=False)
    op.create_index("ix_sessions_updated_at", "sessions", ["updated_at"], unique=False)
    op.create_table(
        "events",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("adapter", sa.String(length=64), nullable=False),
        sa.Column("platform", sa.String(length=64), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=True),
        sa.Column("space", sa.String(length=255), nullable=True),
        sa.Column("sender_id", sa.String(length=255), nullable=True),
        sa.Column("sender_name", sa.Text(), nullable=True),
        sa.Column("container_kind", sa.String(length=32), nullable=True),
        sa.Column("container_id", sa.String(length=255), nullable=True),
        sa.Column("platform_thread_id", sa.String(length=255), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column(
            "attachments",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("reply_to", sa.String(length=255), nullable=True),
        sa.Column("message_id", sa.String(length=255), nullable=True),
        sa.Column("occurred_at", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("contact_id", sa.String(length=26), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("disposition", sa.String(length=32), nullable=True),
        sa.Column("disposition_detail", sa.Text(), nullable=True),
        sa.Column("processed_at", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "direction IN ('inbound', 'outbound')", name=op.f("ck_events_direction")
        ),
        sa.CheckConstraint("status IN ('received', 'processed')", name=op.f("ck_events_status")),
        sa.ForeignKeyConstraint(
            ["contact_id"], ["contacts.id"], name=op.f("fk_events_contact_id_contacts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_container", "events", ["platform", "container_id"], unique=False)
    op.create_index(
        "ix_events_status_received_at", "events", ["status", "received_at"], unique=False
    )
    op.create_table(
        "session_aliases",
        sa.Column("alias", sa.String(length=512), nullable=False),
        sa.Column("session_label", sa.String(length=512), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_label"],
            ["sessions.label"],
            name=op.f("fk_session_aliases_session_label_sessions"),
        ),
        sa.PrimaryKeyConstraint("alias", name=op.f("pk_session_aliases")),
    )
    op.create_index(
        "ix_session_aliases_session_label", "session_aliases", ["session_label"], unique=False
    )
    op.create_table(
        "turns",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("session_id", sa.String(length=26), nullable=False),
        sa.Column("parent_turn_id", sa.String(length=26), nullable=True),
        sa.Column("turn_type", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("queue_mode", sa.String(length=16), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("completed_at", sa.BigInteger(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=True),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=True),
        sa.Column("total_tokens", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=255), nullable=True),
        sa.Column("stop_reason", sa.String(length=64), nullable=True),
        sa.Column("error_kind", sa.String(length=32), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("source_event_id", sa.String(length=255), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'streaming', 'completed', 'failed', 'aborted', 'superseded')",
            name=op.f("ck_turns_status"),
        ),
        sa.CheckConstraint(
            "turn_type IN ('normal', 'compaction')", name=op.f("ck_turns_turn_type")
        ),
        sa.ForeignKeyConstraint(
            ["parent_turn_id"], ["turns.id"], name=op.f("fk_turns_parent_turn_id_turns")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_turns_session_id_sessions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turns")),
    )
    op.create_index("ix_turns_parent_turn_id", "turns", ["parent_turn_id"], unique=False)
    op.create_index(
        "ix_turns_session_id_started_at", "turns", ["session_id", "started_at"], unique=False
    )
    op.create_index(
        "uq_turns_chain_child",
        "turns",
        ["session_id", "parent_turn_id"],
        unique=True,
        postgresql_where=sa.text(
            "status IN ('completed', 'aborted') AND parent_turn_id IS NOT NULL"
        ),
        sqlite_where=sa.text("status IN ('completed', 'aborted') AND parent_turn_id IS NOT NULL"),
    )
    op.create_index(
        "uq_turns_chain_root",
        "turns",
        ["session_id"],
        unique=True,
        postgresql_where=sa.text("status IN ('completed', 'aborted') AND parent_turn_id IS NULL"),
        sqlite_where=sa.text("status IN ('completed', 'aborted') AND parent_turn_id IS NULL"),
    )
    # sessions and turns point at each other. SQLite writes both foreign keys inline in
    # CREATE TABLE (it cannot ALTER); elsewhere they are added once turns exists.
    if op.get_bind().dialect.name != "sqlite":
        op.create_foreign_key(
            "fk_sessions_thread_id_turns",
            "sessions",
            "turns",
            ["thread_id"],
            ["id"],
            deferrable=True,
            initially="DEFERRED",
        )
        op.create_foreign_key(
            "fk_sessions_parent_turn_id_turns", "sessions", "turns", ["parent_turn_id"], ["id"]
        )
    op.create_table(
        "compactions",
        sa.Column("turn_id", sa.String(length=26), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("summarized_through_turn_id", sa.String(length=26), nullable=True),
        sa.Column("first_kept_turn_id", sa.String(length=26), nullable=True),
        sa.Column("turns_summarized", sa.Integer(), nullable=False),
        sa.Column("compaction_type", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=True),
        sa.Column("provider", sa.String(length=64), nullable=True),
        sa.Column("tokens_before", sa.Integer(), nullable=True),
        sa.Column("tokens_after", sa.Integer(), nullable=True),
        sa.Column("summary_tokens", sa.Integer(), nullable=True),
        sa.Column("summarization_input_tokens", sa.Integer(), nullable=True),
        sa.Column("summarization_output_tokens", sa.Integer(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=True),
        sa.Column(
            "metadata_json",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "trigger IN ('proactive', 'overflow', 'manual')", name=op.f("ck_compactions_trigger")
        ),
        sa.ForeignKeyConstraint(
            ["first_kept_turn_id"],
            ["turns.id"],
            name=op.f("fk_compactions_first_kept_turn_id_turns"),
        ),
        sa.ForeignKeyConstraint(
            ["summarized_through_turn_id"],
            ["turns.id"],
            name=op.f("fk_compactions_summarized_through_turn_id_turns"),
        ),
        sa.ForeignKeyConstraint(
            ["turn_id"], ["turns.id"], name=op.f("fk_compactions_turn_id_turns")
        ),
        sa.PrimaryKeyConstraint("turn_id", name=op.f("pk_compactions")),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("turn_id", sa.String(length=26), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(length=26), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("platform", sa.String(length=64), nullable=False),
        sa.Column(
            "target",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("provider_message_id", sa.String(length=255), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'sending', 'sent', 'delivered', 'read', 'failed')",
            name=op.f("ck_deliveries_status"),
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_deliveries_event_id_events")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_deliveries_session_id_sessions")
        ),
        sa.ForeignKeyConstraint(
            ["turn_id"], ["turns.id"], name=op.f("fk_deliveries_turn_id_turns")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
        sa.UniqueConstraint(
            "turn_id", "chunk_index", name=op.f("uq_deliveries_turn_id_chunk_index")
        ),
    )
    op.create_index(
        "ix_deliveries_provider_message_id",
        "deliveries",
        ["platform", "provider_message_id"],
        unique=False,
    )
    op.create_index(
        "ix_deliveries_status_next_attempt_at",
        "deliveries",
        ["status", "next_attempt_at"],
        unique=False,
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("turn_id", sa.String(length=26), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=True),
        sa.Column(
            "content",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("tool_call_id", sa.String(length=255), nullable=True),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "role IN ('user', 'assistant', 'system', 'tool_call', 'tool_result')",
            name=op.f("ck_messages_role"),
        ),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], name=op.f("fk_messages_turn_id_turns")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
        sa.UniqueConstraint("turn_id", "sequence", name=op.f("uq_messages_turn_id_sequence")),
    )
    op.create_index("ix_messages_event_id", "messages", ["event_id"], unique=False)
    op.create_table(
        "queue_items",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("session_id", sa.String(length=26), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=True),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_epoch", sa.BigInteger(), nullable=True),
        sa.Column("claim_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("available_at", sa.BigInteger(), nullable=False),
        sa.Column("disposition", sa.String(length=16), nullable=True),
        sa.Column("disposition_detail", sa.Text(), nullable=True),
        sa.Column("consumed_by_turn_id", sa.String(length=26), nullable=True),
        sa.Column("enqueued_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "disposition IN ('consumed', 'batched', 'injected', 'dropped', 'cancelled', 'denied', 'dead_lettered')",
            name=op.f("ck_queue_items_disposition"),
        ),
        sa.CheckConstraint(
            "mode IN ('interrupt', 'steer', 'steer-backlog', 'followup', 'collect', 'queue')",
            name=op.f("ck_queue_items_mode"),
        ),
        sa.CheckConstraint(
            "status IN ('queued', 'claimed', 'done', 'dropped', 'dead')",
            name=op.f("ck_queue_items_status"),
        ),
        sa.ForeignKeyConstraint(
            ["consumed_by_turn_id"],
            ["turns.id"],
            name=op.f("fk_queue_items_consumed_by_turn_id_turns"),
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["events.id"], name=op.f("fk_queue_items_event_id_events")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_queue_items_session_id_sessions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_items")),
        sa.UniqueConstraint(
            "session_id", "event_id", name=op.f("uq_queue_items_session_id_event_id")
        ),
    )
    op.create_index(
        "ix_queue_items_session_id_status_priority",
        "queue_items",
        ["session_id", "status", "priority"],
        unique=False,
    )
    op.create_index(
        "ix_queue_items_status_claim_expires_at",
        "queue_items",
        ["status", "claim_expires_at"],
        unique=False,
    )
    op.create_table(
        "session_history",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("session_id", sa.String(length=26), nullable=False),
        sa.Column("thread_id", sa.String(length=26), nullable=True),
        sa.Column("previous_thread_id", sa.String(length=26), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("changed_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["previous_thread_id"],
            ["turns.id"],
            name=op.f("fk_session_history_previous_thread_id_turns"),
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_session_history_session_id_sessions")
        ),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["turns.id"], name=op.f("fk_session_history_thread_id_turns")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_history")),
    )
    op.create_index(
        "ix_session_history_session_id_changed_at",
        "session_history",
        ["session_id", "changed_at"],
        unique=False,
    )
    op.create_table(
        "threads",
        sa.Column("turn_id", sa.String(length=26), nullable=False),
        sa.Column("parent_turn_id", sa.String(length=26), nullable=True),
        sa.Column("session_id", sa.String(length=26), nullable=False),
        sa.Column("persona_id", sa.String(length=26), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("anchor_turn_id", sa.String(length=26), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["anchor_turn_id"], ["turns.id"], name=op.f("fk_threads_anchor_turn_id_turns")
        ),
        sa.ForeignKeyConstraint(
            ["parent_turn_id"], ["turns.id"], name=op.f("fk_threads_parent_turn_id_turns")
        ),
        sa.ForeignKeyConstraint(
            ["persona_id"], ["agents.id"], name=op.f("fk_threads_persona_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_threads_session_id_sessions")
        ),
        sa.ForeignKeyConstraint(["turn_id"], ["turns.id"], name=op.f("fk_threads_turn_id_turns")),
        sa.PrimaryKeyConstraint("turn_id", name=op.f("pk_threads")),
    )
    op.create_index("ix_threads_parent_turn_id", "threads", ["parent_turn_id"], unique=False)
    op.create_table(
        "tool_calls",
        sa.Column("id", sa.String(length=26), nullable=False),
        sa.Column("turn_id", sa.String(length=26), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("provider_call_id", sa.String(length=255), nullable=False),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column(
            "parameters",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "result",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("spawned_session_label", sa.String(length=512), nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("completed_at", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'completed', 'failed', 'skipped')",
            name=op.f("ck_tool_calls_status"),
        ),
        sa.ForeignKeyConstraint(
            ["turn_id"], ["turns.id"], name=op.f("fk_tool_calls_turn_id_turns")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_calls")),
        sa.UniqueConstraint("turn_id", "sequence", name=op.f("uq_tool_calls_turn_id_sequence")),
    )
    op.create_index("ix_tool_calls_tool_name", "tool_calls", ["tool_name"], unique=False)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint("fk_sessions_thread_id_turns", "sessions", type_="foreignkey")
        op.drop_constraint("fk_sessions_parent_turn_id_turns", "sessions", type_="foreignkey")
    op.drop_index("ix_tool_calls_tool_name", table_name="tool_calls")
    op.drop_table("tool_calls")
    op.drop_index("ix_threads_parent_turn_id", table_name="threads")
    op.drop_table("threads")
    op.drop_index("ix_session_history_session_id_changed_at", table_name="session_history")
    op.drop_table("session_history")
    op.drop_index("ix_queue_items_status_claim_expires_at", table_name="queue_items")
    op.drop_index("ix_queue_items_session_id_status_priority", table_name="queue_items")
    op.drop_table("queue_items")
    op.drop_index("ix_messages_event_id", table_name="messages")
    op.drop_table("messages")
    op.drop_index("ix_deliveries_status_next_attempt_at", table_name="deliveries")
    op.drop_index("ix_deliveries_provider_message_id", table_name="deliveries")
    op.drop_table("deliveries")
    op.drop_table("compactions")
    op.drop_index(
        "uq_turns_chain_root",
        table_name="turns",
        postgresql_where=sa.text("status IN ('completed', 'aborted') AND parent_turn_id IS NULL"),
        sqlite_where=sa.text("status IN ('completed', 'aborted') AND parent_turn_id IS NULL"),
    )
    op.drop_index(
        "uq_turns_chain_child",
        table_name="turns",
        postgresql_where=sa.text(
            "status IN ('completed', 'aborted') AND parent_turn_id IS NOT NULL"
        ),
        sqlite_where=sa.text("status IN ('completed', 'aborted') AND parent_turn_id IS NOT NULL"),
    )
    op.drop_index("ix_turns_session_id_started_at", table_name="turns")
    op.drop_index("ix_turns_parent_turn_id", table_name="turns")
    op.drop_table("turns")
    op.drop_index("ix_session_aliases_session_label", table_name="session_aliases")
    op.drop_table("session_aliases")
    op.drop_index("ix_events_status_received_at", table_name="events")
    op.drop_index("ix_events_container", table_name="events")
    op.drop_table("events")
    op.drop_index("ix_sessions_updated_at", table_name="sessions")
    op.drop_index("ix_sessions_persona_id", table_name="sessions")
    op.drop_index("ix_sessions_parent_session_label", table_name="sessions")
    op.drop_table("sessions")
    op.drop_index("ix_hook_invocations_hook_name_started_at", table_name="hook_invocations")
    op.drop_index("ix_hook_invocations_event_id", table_name="hook_invocations")
    op.drop_table("hook_invocations")
    op.drop_table("contacts")
    op.drop_table("agent_capabilities")
    op.drop_table("timer_state")
    op.drop_table("hooks")
    op.drop_index("ix_entities_merged_into", table_name="entities")
    op.drop_table("entities")
    op.drop_table("capabilities")
    op.drop_table("agents")
