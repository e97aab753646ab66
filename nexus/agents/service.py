"""Personas: list, read, create, change and archive them, choose their capabilities, and the
model configuration a session of theirs runs with.

Plain functions over the caller's unit of work (the caller commits); they answer records and
raise the ledger's errors (NotFound, LedgerConflict), ModelConfigError for a model
configuration the API would refuse, and CapabilityRefused for a capability list that
cannot be given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict, Unpack

from nexus.db import UnitOfWork
from nexus.engine.capabilities import Capability, CapabilityRegistry
from nexus.engine.model_config import parse, to_json
from nexus.ledger.enums import AgentStatus
from nexus.ledger.records import AgentRecord
from nexus.ledger.repository import NotFound


class PersonaNotFound(NotFound):
    def __init__(self, agent_id: str) -> None:
        super().__init__(f"no agent with id {agent_id!r}")


class CapabilityRefused(ValueError):
    """A capability list that cannot be given; `code` says why, for the caller to show."""

    code: ClassVar[str] = "invalid_request"


class CapabilityListedTwice(CapabilityRefused):
    code = "invalid_request"


class UnknownCapability(CapabilityRefused):
    code = "unknown_capability"


class CapabilityUnavailable(CapabilityRefused):
    code = "capability_unavailable"


@dataclass(frozen=True)
class Persona:
    """A persona and the ids of its capabilities, in the order they apply."""

    record: AgentRecord
    capabilities: list[str]


def page(
    uow: UnitOfWork, *, after_name: str | None, limit: int, include_archived: bool = False
) -> list[Persona]:
    """Up to `limit` personas in name order after `after_name`; archived ones when asked."""
    found = uow.ledger.agents.page(
        after_name=after_name, limit=limit, include_archived=include_archived
    )
    capabilities = uow.ledger.agents.capability_ids_of([agent.id for agent in found])
    return [Persona(agent, capabilities.get(agent.id, [])) for agent in found]


def get(uow: UnitOfWork, agent_id: str) -> Persona:
    """The persona with its capabilities; PersonaNotFound when there is none."""
    agent = uow.ledger.agents.get(agent_id)
    if agent is None:
        raise PersonaNotFound(agent_id)
    return Persona(agent, uow.ledger.agents.capability_ids(agent_id))


class PersonaFields(TypedDict, total=False):
    """A new persona's fields besides its name: the ledger's defaults stand for those left out."""

    system_prompt: str
    default_model: str | None
    default_model_config: Mapping[str, Any] | None
    permissions: Mapping[str, Any] | None
    description: str | None
    emoji: str | None
    tags: Sequence[str]


def create(uow: UnitOfWork, name: str, **fields: Unpack[PersonaFields]) -> Persona:
    """A new persona, with no capabilities; LedgerConflict when the name is taken."""
    return Persona(uow.ledger.agents.create(name, **fields), [])


def update(uow: UnitOfWork, agent_id: str, changes: Mapping[str, Any]) -> Persona:
    """Set the fields given, the others as they are. A `default_model_config` given is a
    patch of the stored one (a field replaces its own, a null field clears it, None
    clears them all), checked as a whole: ModelConfigError when the result is refused.
    PersonaNotFound for an unknown id, LedgerConflict for a name another persona holds."""
    fields = dict(changes)
    if "default_model_config" in fields:
        agent = uow.ledger.agents.get(agent_id)
        stored = agent.default_model_config if agent is not None else None
        # Checked whole: a PATCH may add thinking to a stored temperature, which is refused.
        fields["default_model_config"] = to_json(
            parse(_patched(stored, fields["default_model_config"]))
        )
    try:
        uow.ledger.agents.update_fields(agent_id, fields)
    except NotFound as error:
        raise PersonaNotFound(agent_id) from error
    return get(uow, agent_id)


def archive(uow: UnitOfWork, agent_id: str) -> Persona:
    """Archive the persona: its sessions and turns point at it, so the row always stays."""
    return update(uow, agent_id, {"status": AgentStatus.ARCHIVED.value})


def _patched(stored: Mapping[str, Any] | None, given: Mapping[str, Any] | None) -> dict[str, Any]:
    if given is None:
        return {}
    merged = {**(stored or {}), **given}
    return {name: value for name, value in merged.items() if value is not None}


def set_capabilities(
    uow: UnitOfWork, registry: CapabilityRegistry, agent_id: str, capability_ids: Sequence[str]
) -> Persona:
    """Replace the persona's capabilities; the order given is the order they apply in.
    CapabilityRefused (before anything is read) for one listed twice, unknown, or not
    available yet; PersonaNotFound for an unknown persona."""
    chosen = _chosen(registry, capability_ids)
    if uow.ledger.agents.get(agent_id) is None:
        raise PersonaNotFound(agent_id)
    uow.ledger.agents.set_capabilities(
        agent_id,
        [(c.id, c.name, c.description, c.status) for c in chosen],
        looks={c.id: (c.icon, c.category) for c in chosen},
    )
    return get(uow, agent_id)


def _chosen(registry: CapabilityRegistry, capability_ids: Sequence[str]) -> list[Capability]:
    known = {c.id: c for c in registry.all()}
    seen: set[str] = set()
    for capability_id in capability_ids:
        if capability_id in seen:
            raise CapabilityListedTwice(f"capability {capability_id!r} is listed twice")
        seen.add(capability_id)
        found = known.get(capability_id)
        if found is None:
            names = ", ".join(sorted(known))
            raise UnknownCapability(f"unknown capability {capability_id!r} (known: {names})")
        # The engine refuses these at turn time; refusing them here keeps the persona usable.
        if found.status == "coming_soon":
            raise CapabilityUnavailable(f"capability {capability_id!r} is not available yet")
    return [known[c] for c in capability_ids]
