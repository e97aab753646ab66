"""What a turn reads before its model call: session, persona, capabilities and head at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, select, true

from nexus.ids import Clock, now_ms
from nexus.ledger.records import (
    AgentRecord,
    CompactionRecord,
    ContextRead,
    QueueItemRecord,
    SessionRecord,
    ThreadRecord,
)
from nexus.ledger.repository import driver
from nexus.ledger.repository.errors import NotFound
from nexus.ledger.repository.queue import QueueRepository
from nexus.ledger.repository.queue_sql import SESSION_EPOCH, claiming
from nexus.ledger.repository.sessions import BUMP
from nexus.ledger.repository.tables import (
    agent_capabilities,
    agents,
    compactions,
    queue_items,
    sessions,
    threads,
)
from nexus.ledger.repository.threads import ThreadRepository, head_context_row


@dataclass(frozen=True)
class SessionSnapshot:
    """The session as a run finds it: its persona, the persona's capabilities in the order
    they apply, and the context at its head."""

    session: SessionRecord
    persona: AgentRecord
    capability_ids: tuple[str, ...]
    context: ContextRead


class SnapshotRepository:
    def __init__(self, connection: Connection, clock: Clock = now_ms) -> None:
        self._conn = connection
        self._clock = clock

    def read(self, session_id: str, *, known: ContextRead | None = None) -> SessionSnapshot:
        """One round trip for the session, its persona and capabilities, and its head's
        thread row with its anchor; then the context (none more when `known`, a context
        read before, is the head's already; only the turns after it when it is an
        ancestor's under the same compaction)."""
        rows = driver.rows(self._conn, _SNAPSHOT, {"session": session_id})
        if not rows:
            raise NotFound(f"no session with id {session_id!r}")
        return self._snapshot(rows, known)

    def claim(
        self,
        session_id: str,
        item_ids: Sequence[str],
        *,
        lease_ms: int,
        known: ContextRead | None = None,
    ) -> tuple[int, list[QueueItemRecord], SessionSnapshot | None]:
        """`queue.claim_for_run`, and the snapshot a turn reads before its model call as the
        claim leaves the session: one statement on Postgres for both (then the context, as
        `read`, when the run has not read it yet). The snapshot is None when nothing was
        claimed (the items were taken meanwhile)."""
        if self._conn.dialect.name != "postgresql":
            epoch, items = QueueRepository(self._conn, self._clock).claim_for_run(
                session_id, item_ids, lease_ms=lease_ms
            )
            return epoch, items, self.read(session_id, known=known) if items else None
        now = self._clock()
        params = {
            "bump_session": session_id,
            "run_items": list(item_ids),
            "run_expires_at": now + lease_ms,
            "run_now": now,
        }
        rows = driver.rows(self._conn, _CLAIM_READING, params)
        if not rows:  # nothing claimed (taken meanwhile): the epoch moved on all the same
            current = self._conn.execute(SESSION_EPOCH, params).scalar_one_or_none()
            if current is None:
                raise NotFound(f"no session with id {session_id!r}")
            return int(current), [], None
        claimed: dict[str, QueueItemRecord] = {}
        for row in rows:
            if row["q_id"] not in claimed:
                claimed[row["q_id"]] = QueueItemRecord.model_validate(
                    {n: row[f"q_{n}"] for n in _ITEM_FIELDS}
                )
        first = rows[0]["q_id"]
        order = {item_id: index for index, item_id in enumerate(item_ids)}
        items = sorted(claimed.values(), key=lambda item: order[item.id])
        snapshot = self._snapshot([row for row in rows if row["q_id"] == first], known)
        return int(rows[0]["s_epoch"]), items, snapshot

    def _snapshot(
        self, rows: Sequence[Mapping[str, Any]], known: ContextRead | None
    ) -> SessionSnapshot:
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

# The claim (`queue_sql.CLAIM_FOR_RUN`) with the snapshot above read off the session row it
# leaves: one row per claimed item and capability. The session's columns come from the
# bump's RETURNING (a statement's own changes are invisible to its reads).
_ITEM_FIELDS = list(QueueItemRecord.model_fields)
_bump = BUMP.returning(*(sessions.c[name] for name in _SESSION_FIELDS)).cte("b")
_claimed = claiming(_bump).returning(*(queue_items.c[name] for name in _ITEM_FIELDS)).cte("c")
# Short names, so that the statement's text stays within what psycopg 3 caches converted
# (4,096 characters): longer, it would be parsed again on every claim.
_a, _ac, _h, _an, _cp = (
    agents.alias("a"),
    agent_capabilities.alias("ac"),
    threads.alias("h"),
    threads.alias("an"),
    compactions.alias("cp"),
)
_CLAIM_READING = (
    select(
        *(_claimed.c[name].label(f"q_{name}") for name in _ITEM_FIELDS),
        *(_bump.c[name].label(f"s_{name}") for name in _SESSION_FIELDS),
        *(_a.c[name].label(f"a_{name}") for name in _AGENT_FIELDS),
        _ac.c.capability_id,
        *(_h.c[name].label(f"h_{name}") for name in ThreadRecord.model_fields),
        _an.c.depth.label("anchor_depth"),
        *(_cp.c[name].label(f"c_{name}") for name in CompactionRecord.model_fields),
    )
    .select_from(
        _claimed.join(_bump, true())
        .outerjoin(_a, _a.c.id == _bump.c.persona_id)
        .outerjoin(_ac, _ac.c.agent_id == _a.c.id)
        .outerjoin(_h, _h.c.turn_id == _bump.c.thread_id)
        .outerjoin(_an, _an.c.turn_id == _h.c.anchor_turn_id)
        .outerjoin(_cp, _cp.c.turn_id == _h.c.anchor_turn_id)
    )
    .order_by(_claimed.c.id, _ac.c.position)
)
