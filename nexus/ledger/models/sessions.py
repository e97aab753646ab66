"""Sessions (named pointers to a head turn), their aliases, pointer history, and the tasks
agents dispatch to sessions they did not spawn as workers."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from nexus.ledger.enums import QueueMode, SessionOrigin, SessionStatus, TaskKind, TaskStatus
from nexus.ledger.models.base import Base, Millis, one_of

# The sessions a label can name: a deleted one keeps its rows but frees its label.
LIVE_SESSION = "status <> 'deleted'"


class Session(Base):
    """A label whose `thread_id` moves to each new head turn; `epoch` fences stale runs."""

    __tablename__ = "sessions"
    __table_args__ = (
        one_of("origin", SessionOrigin),
        one_of("status", SessionStatus),
        one_of("queue_mode", QueueMode),
        Index("ix_sessions_persona_id", "persona_id"),
        Index("ix_sessions_parent_session_label", "parent_session_label"),
        Index("ix_sessions_routing_key", "routing_key"),
        # A label names one session at a time: a deleted session frees it (migration 0014).
        Index("ix_sessions_label", "label"),
        Index(
            "ux_sessions_live_label",
            "label",
            unique=True,
            postgresql_where=text(LIVE_SESSION),
            sqlite_where=text(LIVE_SESSION),
        ),
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    label: Mapped[str] = mapped_column(String(512))
    persona_id: Mapped[str] = mapped_column(ForeignKey("agents.id"))
    routing_key: Mapped[str | None] = mapped_column(String(512))
    # The head turn. The turns table points back at sessions, so this side of the cycle is
    # added after both tables exist (use_alter) on databases that can ALTER. It is checked at
    # commit (deferred) so a turn commit can move the pointer first: that one UPDATE is the
    # compare-and-set, and it takes the row lock before anything else is written.
    thread_id: Mapped[str | None] = mapped_column(
        ForeignKey(
            "turns.id",
            use_alter=True,
            name="fk_sessions_thread_id_turns",
            deferrable=True,
            initially="DEFERRED",
        )
    )
    # The first turn committed in the session, set by that turn's commit. No
    # foreign key: SQLite cannot add one to an existing table that others reference.
    root_turn_id: Mapped[str | None] = mapped_column(String(26))
    epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    origin: Mapped[str] = mapped_column(String(16), default=SessionOrigin.USER)
    status: Mapped[str] = mapped_column(String(16), default=SessionStatus.ACTIVE)
    source_event_id: Mapped[str | None] = mapped_column(String(255))
    # Worker linkage (docs/hooks.md): who spawned this worker, from which turn and tool call.
    is_subagent: Mapped[bool] = mapped_column(default=False)
    parent_session_label: Mapped[str | None] = mapped_column(String(512))
    parent_turn_id: Mapped[str | None] = mapped_column(
        ForeignKey("turns.id", use_alter=True, name="fk_sessions_parent_turn_id_turns")
    )
    spawn_tool_call_id: Mapped[str | None] = mapped_column(String(26))
    task_description: Mapped[str | None] = mapped_column(Text)
    task_status: Mapped[str | None] = mapped_column(String(16))
    # Per-session queue settings; NULL means "use the policy default".
    queue_mode: Mapped[str | None] = mapped_column(String(16))
    queue_cap: Mapped[int | None] = mapped_column(Integer)
    drop_policy: Mapped[str | None] = mapped_column(String(16))
    debounce_ms: Mapped[int | None] = mapped_column(Integer)
    # The session's own model configuration (docs/engine.md); NULL: the persona's.
    model_overrides: Mapped[dict[str, Any] | None] = mapped_column()
    # What a person calls it and files it under; Nexus only stores them.
    title: Mapped[str | None] = mapped_column(Text)
    tags: Mapped[list[Any] | None] = mapped_column()
    # The first turn's start; when it finished (a worker's task ended, or it was archived
    # or deleted).
    started_at: Mapped[int | None] = mapped_column(Millis)
    finished_at: Mapped[int | None] = mapped_column(Millis)
    created_at: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)


class SessionAlias(Base):
    """Another key that resolves to a session, e.g. after an entity merge."""

    __tablename__ = "session_aliases"
    __table_args__ = (Index("ix_session_aliases_session_label", "session_label"),)

    alias: Mapped[str] = mapped_column(String(512), primary_key=True)
    # A label, not a row: it leads to the live session with that label (no foreign key, as
    # labels are unique only among sessions that are not deleted).
    session_label: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[int] = mapped_column(Millis)
    reason: Mapped[str | None] = mapped_column(String(32))


class SessionHistory(Base):
    """One row for every move of a session pointer: creation, turn, fork."""

    __tablename__ = "session_history"
    __table_args__ = (
        Index("ix_session_history_session_id_changed_at", "session_id", "changed_at"),
        {"sqlite_with_rowid": False},  # one B-tree fewer per turn (migration 0004)
    )

    id: Mapped[str] = mapped_column(String(26), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    thread_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id"))
    previous_thread_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id"))
    epoch: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(String(32))
    changed_at: Mapped[int] = mapped_column(Millis)


class SessionTask(Base):
    """A task an agent dispatched to an existing session or to a fork it made (`agent_send`
    with a `session` or `fork` target), keyed by the event that carries it: the session's
    answer to that event goes back to the caller as a `worker_result`. A worker the caller
    spawned keeps its task on its own session row instead (`sessions.task_*`)."""

    __tablename__ = "session_tasks"
    __table_args__ = (
        one_of("kind", TaskKind),
        one_of("task_status", TaskStatus),
        Index("ix_session_tasks_caller_session_label", "caller_session_label", "created_at"),
    )

    event_id: Mapped[str] = mapped_column(ForeignKey("events.id"), primary_key=True)
    # Who dispatched it: the session, its turn, and the tool call (the ledger's id).
    caller_session_label: Mapped[str] = mapped_column(String(512))
    caller_turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id"))
    tool_call_id: Mapped[str | None] = mapped_column(String(26))
    # The session that serves it.
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"))
    kind: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(Text)
    # pending until its answer (or failure) went back; running, cancelled and the rest of
    # what a reader sees come from its queue item (nexus.agents.dispatched).
    task_status: Mapped[str] = mapped_column(String(16), default=TaskStatus.PENDING)
    created_at: Mapped[int] = mapped_column(Millis)
    updated_at: Mapped[int] = mapped_column(Millis)
