"""Personas: get or create by name, configure, and the capabilities they carry in order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, select, update

from nexus.ids import Clock, new_id
from nexus.ledger.models import Agent, AgentCapability, Capability, table_of
from nexus.ledger.records import AgentRecord
from nexus.ledger.repository._sql import columns_for, to_record, upsert_insert
from nexus.ledger.repository.errors import NotFound

agents = table_of(Agent)
capabilities = table_of(Capability)
agent_capabilities = table_of(AgentCapability)


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

    def configure(
        self,
        agent_id: str,
        *,
        system_prompt: str | None = None,
        permissions: Mapping[str, Any] | None = None,
        default_model: str | None = None,
    ) -> AgentRecord:
        """Change a persona's soul, permissions or default model (None leaves one as is)."""
        values: dict[str, Any] = {"updated_at": self._clock()}
        if system_prompt is not None:
            values["system_prompt"] = system_prompt
        if permissions is not None:
            values["permissions"] = dict(permissions)
        if default_model is not None:
            values["default_model"] = default_model
        self._conn.execute(update(agents).where(agents.c.id == agent_id).values(values))
        found = self.get(agent_id)
        if found is None:
            raise NotFound(f"no persona with id {agent_id!r}")
        return found

    def set_capabilities(self, agent_id: str, chosen: Sequence[tuple[str, str, str, str]]) -> None:
        """Give the persona these capabilities (id, name, description, status), in this order.

        The catalogue lives in code; its rows are upserted so the junction's foreign keys hold.
        """
        now = self._clock()
        for capability_id, name, description, status in chosen:
            statement = upsert_insert(self._conn, capabilities).values(
                id=capability_id, name=name, description=description, status=status
            )
            self._conn.execute(
                statement.on_conflict_do_update(
                    index_elements=["id"],
                    set_={"name": name, "description": description, "status": status},
                )
            )
        self._conn.execute(
            delete(agent_capabilities).where(agent_capabilities.c.agent_id == agent_id)
        )
        for position, (capability_id, *_rest) in enumerate(chosen):
            self._conn.execute(
                agent_capabilities.insert().values(
                    id=new_id(),
                    agent_id=agent_id,
                    capability_id=capability_id,
                    position=position,
                    created_at=now,
                )
            )

    def capability_ids(self, agent_id: str) -> list[str]:
        """The persona's capabilities in the order they are applied."""
        rows = self._conn.execute(
            select(agent_capabilities.c.capability_id)
            .where(agent_capabilities.c.agent_id == agent_id)
            .order_by(agent_capabilities.c.position)
        )
        return [row[0] for row in rows]
