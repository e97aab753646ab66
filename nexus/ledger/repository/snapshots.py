"""What a turn reads before its model call: session, persona, capabilities and head at once."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, select

from nexus.ledger.models import (
    Agent,
    AgentCapability,
    Compaction,
    Session,
    Thread,
    table_of,
)
from nexus.ledger.records import (
    AgentRecord,
    CompactionRecord,
    ContextRead,
    SessionRecord,
    ThreadRecord,
)
from nexus.ledger.repository import driver
from nexus.ledger.repository.errors import NotFound
from nexus.ledger.repository.threads import ThreadRepository, head_context_row

sessions = table_of(Session)
agents = table_of(Agent)
agent_capabilities = table_of(AgentCapability)
threads = table_of(Thread)
compactions = table_of(Compaction)


@dataclass(frozen=True)
class SessionSnapshot:
    """The session as a run finds it: its persona, the persona's capabilities in the order
    they apply, and the context at its head."""

    session: SessionRecord
    persona: AgentRecord
    capability_ids: tuple[str, ...]
    context: ContextRead


class SnapshotRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def read(self, session_id: str, *, known: ContextRead | None = None) -> SessionSnapshot:
        """One round trip for the session, its persona and capabilities, and its head's
        thread row with its anchor; then the context (none more when `known`, a context
        read before, is the head's already; only the turns after it when it is an
        ancestor's under the same compaction)."""
        rows = driver.rows(self._conn, _SNAPSHOT, {"session": session_id})
        if not rows:
            raise NotFound(f"no session with id {session_id!r}")
        first = rows[0]
        session = SessionRecord.model_validate({n: first[f"s_{n}"] for n in _SESSION_FIELDS})
        if first["a_id"] is None:
            raise NotFound(f"session {session.label!r} has no persona {session.persona_id!r}")
        persona = AgentRecord.model_validate({n: first[f"a_{n}"] for n in _AGENT_FIELDS})
        capability_ids = tuple(
            row["capability_id"] for row in rows if row["capability_id"] is not None
        )
        if first["h_turn_id"] is None:
            context = ContextRead(head=None, compaction=None, turns=(), rows_read=0)
        else:
            head = head_context_row(first, prefix="h_")
            context = ThreadRepository(self._conn).context_at(head, known=known)
        return SessionSnapshot(
            session=session, persona=persona, capability_ids=capability_ids, context=context
        )


_SESSION_FIELDS = list(SessionRecord.model_fields)
_AGENT_FIELDS = list(AgentRecord.model_fields)
_head = threads.alias("head")
_anchor = threads.alias("anchor")
# One row per capability (one with none): the session's and persona's columns repeat, which
# costs less than a second round trip for a list that is usually empty or short.
_SNAPSHOT = (
    select(
        *(sessions.c[name].label(f"s_{name}") for name in _SESSION_FIELDS),
        *(agents.c[name].label(f"a_{name}") for name in _AGENT_FIELDS),
        agent_capabilities.c.capability_id,
        *(_head.c[name].label(f"h_{name}") for name in ThreadRecord.model_fields),
        _anchor.c.depth.label("anchor_depth"),
        *(compactions.c[name].label(f"c_{name}") for name in CompactionRecord.model_fields),
    )
    .select_from(
        sessions.outerjoin(agents, agents.c.id == sessions.c.persona_id)
        .outerjoin(agent_capabilities, agent_capabilities.c.agent_id == agents.c.id)
        .outerjoin(_head, _head.c.turn_id == sessions.c.thread_id)
        .outerjoin(_anchor, _anchor.c.turn_id == _head.c.anchor_turn_id)
        .outerjoin(compactions, compactions.c.turn_id == _head.c.anchor_turn_id)
    )
    .where(sessions.c.id == bindparam("session"))
    .order_by(agent_capabilities.c.position)
)
