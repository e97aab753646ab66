"""Personas: get or create by name, configure, and the capabilities they carry in order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.exc import IntegrityError

from nexus.ids import Clock, new_id
from nexus.ledger.enums import AgentStatus
from nexus.ledger.records import AgentRecord
from nexus.ledger.repository._sql import columns_for, one_record, to_record, upsert_insert
from nexus.ledger.repository.errors import LedgerConflict, NotFound
from nexus.ledger.repository.tables import agent_capabilities, agents, capabilities


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
            default_model_config={},
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
        return one_record(self._conn, agents, AgentRecord, agents.c.id == agent_id)

    def get_by_name(self, name: str) -> AgentRecord | None:
        return one_record(self._conn, agents, AgentRecord, agents.c.name == name)

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

    def set_capabilities(
        self,
        agent_id: str,
        chosen: Sequence[tuple[str, str, str, str]],
        *,
        looks: Mapping[str, tuple[str | None, str | None]] | None = None,
    ) -> None:
        """Give the persona these capabilities (id, name, description, status), in this order;
        `looks` gives a capability's (icon, category) by id.

        The catalogue lives in code; its rows are upserted so the junction's foreign keys hold.
        """
        now = self._clock()
        for capability_id, name, description, status in chosen:
            icon, category = (looks or {}).get(capability_id, (None, None))
            fields = {
                "name": name,
                "description": description,
                "status": status,
                "icon": icon,
                "category": category,
            }
            statement = upsert_insert(self._conn, capabilities).values(id=capability_id, **fields)
            self._conn.execute(statement.on_conflict_do_update(index_elements=["id"], set_=fields))
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

    # -- the personas API ---------------------------------------------------------------------

    def create(
        self,
        name: str,
        *,
        system_prompt: str = "",
        default_model: str | None = None,
        default_model_config: Mapping[str, Any] | None = None,
        permissions: Mapping[str, Any] | None = None,
        description: str | None = None,
        emoji: str | None = None,
        tags: Sequence[str] = (),
    ) -> AgentRecord:
        """A new persona; LedgerConflict when the name is taken (archived personas too)."""
        now = self._clock()
        agent_id = new_id()
        statement = upsert_insert(self._conn, agents).values(
            id=agent_id,
            name=name,
            system_prompt=system_prompt,
            default_model=default_model,
            default_model_config=dict(default_model_config or {}),
            permissions=dict(permissions or {}),
            description=description,
            emoji=emoji,
            tags=list(tags),
            status=AgentStatus.ACTIVE,
            created_at=now,
            updated_at=now,
        )
        inserted = self._conn.execute(
            statement.on_conflict_do_nothing(index_elements=["name"]).returning(agents.c.id)
        ).scalar_one_or_none()
        if inserted is None:
            raise LedgerConflict(f"a persona named {name!r} exists already")
        created = self.get(agent_id)
        assert created is not None
        return created

    def page(
        self, *, after_name: str | None, limit: int, include_archived: bool = False
    ) -> list[AgentRecord]:
        """Up to `limit` personas in name order, starting after `after_name` (a keyset page)."""
        query = select(*columns_for(agents, AgentRecord)).order_by(agents.c.name).limit(limit)
        if after_name is not None:
            query = query.where(agents.c.name > after_name)
        if not include_archived:
            query = query.where(agents.c.status != AgentStatus.ARCHIVED)
        return [to_record(AgentRecord, row) for row in self._conn.execute(query)]

    def update_fields(self, agent_id: str, changes: Mapping[str, Any]) -> AgentRecord:
        """Set exactly the given fields (name, system_prompt, default_model,
        default_model_config, permissions, description, emoji, tags, status); unlike
        `configure`, a None default_model (description, emoji) clears it. A name another
        persona holds is LedgerConflict; an unknown id is NotFound."""
        allowed = {
            "name",
            "system_prompt",
            "default_model",
            "default_model_config",
            "permissions",
            "description",
            "emoji",
            "tags",
            "status",
        }
        unknown = set(changes) - allowed
        if unknown:
            raise ValueError(f"personas have no field(s) {', '.join(sorted(unknown))}")
        if self.get(agent_id) is None:
            raise NotFound(f"no persona with id {agent_id!r}")
        values = {**changes, "updated_at": self._clock()}
        statement = update(agents).where(agents.c.id == agent_id).values(values)
        try:
            # A savepoint, so losing a rename race leaves the caller's transaction usable.
            with self._conn.begin_nested():
                self._conn.execute(statement)
        except IntegrityError as error:
            if "name" not in changes:
                raise
            raise LedgerConflict(f"a persona named {changes['name']!r} exists already") from error
        found = self.get(agent_id)
        assert found is not None
        return found

    def capability_ids_of(self, agent_ids: Sequence[str]) -> dict[str, list[str]]:
        """Each persona's capabilities in order, for many personas in one query."""
        found: dict[str, list[str]] = {agent_id: [] for agent_id in agent_ids}
        if not found:
            return found
        rows = self._conn.execute(
            select(agent_capabilities.c.agent_id, agent_capabilities.c.capability_id)
            .where(agent_capabilities.c.agent_id.in_(list(found)))
            .order_by(agent_capabilities.c.agent_id, agent_capabilities.c.position)
        )
        for agent_id, capability_id in rows:
            found[agent_id].append(capability_id)
        return found
