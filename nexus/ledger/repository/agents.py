"""Personas: get or create by name."""

from __future__ import annotations

from sqlalchemy import Connection, select

from nexus.ids import Clock, new_id
from nexus.ledger.models import Agent, table_of
from nexus.ledger.records import AgentRecord
from nexus.ledger.repository._sql import columns_for, to_record, upsert_insert
from nexus.ledger.repository.errors import NotFound

agents = table_of(Agent)


class AgentRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def ensure(self, name: str, *, system_prompt: str = "") -> AgentRecord:
        """The persona called `name`, created on first use (safe under concurrency)."""
        found = self.get_by_name(name)
        if found is not None:
            return found
        now = self._clock()
        statement = upsert_insert(self._conn, agents).values(
            id=new_id(),
            name=name,
            system_prompt=system_prompt,
            model_config={},
            permissions={},
            tags=[],
            status="active",
            created_at=now,
            updated_at=now,
        )
        self._conn.execute(statement.on_conflict_do_nothing(index_elements=["name"]))
        created = self.get_by_name(name)
        if created is None:  # pragma: no cover - the insert or a racing one made it exist
            raise NotFound(f"persona {name!r} vanished while being created")
        return created

    def get(self, agent_id: str) -> AgentRecord | None:
        row = self._conn.execute(
            select(*columns_for(agents, AgentRecord)).where(agents.c.id == agent_id)
        ).one_or_none()
        return None if row is None else to_record(AgentRecord, row)

    def get_by_name(self, name: str) -> AgentRecord | None:
        row = self._conn.execute(
            select(*columns_for(agents, AgentRecord)).where(agents.c.name == name)
        ).one_or_none()
        return None if row is None else to_record(AgentRecord, row)
