"""Personas over HTTP: list, create, change, archive, and their ordered capabilities."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import Depends
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.json_schema import SkipJsonSchema

from nexus.agents import service as personas
from nexus.agents.service import CapabilityRefused, Persona
from nexus.api.deps import DatabaseDep, NexusDep, v1_router
from nexus.api.errors import Answers, ApiError, answering
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.api.schemas.model import ModelConfigBody, without_nulls
from nexus.engine.addresses import MAX_ALLOWED
from nexus.engine.credentials import MAX_CREDENTIALS
from nexus.engine.model_config import ModelConfigError, persona_layer, to_json
from nexus.engine.permissions import read_permissions
from nexus.engine.sandbox import MEMORY_RANGE, TIMEOUT_RANGE
from nexus.ledger.records import AgentRecord, StorableText
from nexus.ledger.repository import LedgerConflict, NotFound
from nexus.ledger.strings import AgentId, CapabilityId, Key, ModelName, PersonaName
from nexus.secrets_file import CREDENTIAL_ID_PATTERN

router = v1_router("/v1", "agents", 404, 409)

# Persona names end up in session labels (system:persona:NAME), so no control characters.
Name = PersonaName
Pattern = Annotated[str, Key(200, "a tool pattern")]
Prompt = Annotated[StorableText, StringConstraints(max_length=100_000)]
Model = ModelName
CredentialId = Annotated[str, StringConstraints(pattern=CREDENTIAL_ID_PATTERN)]
HostOrNetwork = Annotated[str, StringConstraints(min_length=1, max_length=253)]
Description = Annotated[StorableText, StringConstraints(max_length=2_000)]
Emoji = Annotated[str, Key.of("agents", "emoji", "an emoji")]
Tag = Annotated[str, Key(64, "a tag")]
MAX_TAGS = 32


class ToolRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow: list[Pattern] | None = Field(default=None, max_length=200)
    deny: list[Pattern] | None = Field(default=None, max_length=200)


class SandboxRules(BaseModel):
    """The limits of the persona's code-running tools, and whether they get the network;
    `{}` for the defaults (no network)."""

    model_config = ConfigDict(extra="forbid")

    timeout_seconds: float | None = Field(
        default=None, ge=TIMEOUT_RANGE[0], le=TIMEOUT_RANGE[1], strict=True
    )
    memory_mb: int | None = Field(default=None, ge=MEMORY_RANGE[0], le=MEMORY_RANGE[1], strict=True)
    network: bool | None = Field(default=None, strict=True)  # true: the host's network


class NetworkRules(BaseModel):
    """Hosts (`intranet.example.com`, `*.corp.example.com`) and networks (`10.0.0.0/8`)
    the persona's tools may reach besides public addresses."""

    model_config = ConfigDict(extra="forbid")

    allow: list[HostOrNetwork] = Field(default_factory=list, max_length=MAX_ALLOWED)


class PeopleRules(BaseModel):
    """What the persona may do to people's entities through its tools; nothing by default.
    `merge`: merge person entities (the `merge_people` tool), as `POST /v1/entities/merge`."""

    model_config = ConfigDict(extra="forbid")

    merge: bool | None = Field(default=None, strict=True)


class Permissions(BaseModel):
    """A persona's permissions: tools (an absent `allow` means every tool not denied), the
    credential ids its tools may be given, a sandbox for tools that run code, the
    non-public hosts and networks its tools may reach, and what it may do to people."""

    model_config = ConfigDict(extra="forbid")

    tools: ToolRules | None = None
    credentials: list[CredentialId] | None = Field(default=None, max_length=MAX_CREDENTIALS)
    sandbox: SandboxRules | None = None
    network: NetworkRules | None = None
    people: PeopleRules | None = None

    @model_validator(mode="after")
    def _as_the_engine_reads_it(self) -> Permissions:
        read_permissions(self.stored())  # one set of rules: what is stored, a turn can read
        return self

    def stored(self) -> dict[str, Any]:
        # None is dropped rather than stored: the engine reads a present key as a list.
        return self.model_dump(exclude_none=True)


class AgentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    system_prompt: Prompt = ""
    default_model: Model | None = None
    # The model configuration a session or a turn may override field by field.
    default_model_config: ModelConfigBody | None = None
    permissions: Permissions | None = None
    description: Description | None = None
    emoji: Emoji | None = None
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)

    @model_validator(mode="after")
    def _tags_once(self) -> AgentCreate:
        self.tags = _unique(self.tags)
        return self


def _unique(tags: list[str]) -> list[str]:
    """Tags in the order given, each once."""
    return list(dict.fromkeys(tags))


class AgentPatch(BaseModel):
    # At least one field: said in the schema too, so generated bodies are not mostly empty.
    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    # Not null (the schema says so; the validator below tells a caller who sends it).
    name: Name | SkipJsonSchema[None] = None
    system_prompt: Prompt | SkipJsonSchema[None] = None
    default_model: Model | None = None  # null clears it: the deployment default applies
    # The fields given replace the persona's, a null field clears one, null clears them all.
    default_model_config: ModelConfigBody | None = None
    permissions: Permissions | SkipJsonSchema[None] = None
    description: Description | None = None  # null clears it
    emoji: Emoji | None = None  # null clears it
    tags: Annotated[list[Tag], Field(max_length=MAX_TAGS)] | SkipJsonSchema[None] = None

    @model_validator(mode="after")
    def _sensible(self) -> AgentPatch:
        if not self.model_fields_set:
            raise ValueError("give at least one field to change")
        for field in ("name", "system_prompt", "permissions", "tags"):
            if field in self.model_fields_set and getattr(self, field) is None:
                clear = " (send [] to clear them)" if field == "tags" else ""
                raise ValueError(f"{field} cannot be null{clear}")
        if self.tags is not None:
            self.tags = _unique(self.tags)
        return self


class CapabilitiesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    capabilities: list[CapabilityId] = Field(max_length=64)


class AgentView(AgentRecord):
    """A persona with the ids of its capabilities, in the order they apply, and its model
    defaults as one configuration (`default_model_config` with a bare `default_model`
    folded in as its model): what its sessions inherit, shown as from the "persona"."""

    capabilities: list[str]
    model_defaults: dict[str, Any]


class CapabilityView(BaseModel):
    id: str
    name: str
    description: str
    status: str
    icon: str | None  # an emoji
    category: str | None  # what it is about: web, code, agents, messaging, ...


class CapabilityList(BaseModel):
    items: list[CapabilityView]


def _view(persona: Persona) -> AgentView:
    agent = persona.record
    try:
        defaults = to_json(persona_layer(agent))
    except ModelConfigError:  # stored before the rules it breaks: shown as stored
        defaults = dict(agent.default_model_config)
    return AgentView(
        **agent.model_dump(), capabilities=persona.capabilities, model_defaults=defaults
    )


_ANSWERS: Answers = {
    NotFound: (404, "not_found"),
    LedgerConflict: (409, "conflict"),
    ModelConfigError: (422, "invalid_model_config"),
}


@contextmanager
def _answered() -> Iterator[None]:
    """The personas service's errors as the API answers them: a refused capability list
    with the kind its class names."""
    try:
        with answering(_ANSWERS):
            yield
    except CapabilityRefused as error:
        raise ApiError(400, error.code, str(error)) from error


@router.get("/agents")
def list_agents(
    database: DatabaseDep,
    page: Annotated[PageRequest, Depends(page_request)],
    include_archived: bool = False,
) -> Page[AgentView]:
    """Personas in name order, a page at a time; archived ones only when asked for."""
    after = decode_cursor(page.cursor, [str])
    with database.unit_of_work() as uow:
        found = personas.page(
            uow,
            after_name=str(after[0]) if after else None,
            limit=page.limit + 1,
            include_archived=include_archived,
        )
    return page_body(found, page.limit, lambda p: (p.record.name,), _view)


@router.post("/agents", status_code=201)
def create_agent(body: AgentCreate, database: DatabaseDep) -> AgentView:
    """A new persona (a name is taken once)."""
    with _answered(), database.unit_of_work() as uow:
        persona = personas.create(
            uow,
            body.name,
            system_prompt=body.system_prompt,
            default_model=body.default_model,
            default_model_config=without_nulls(body.default_model_config),
            permissions=body.permissions.stored() if body.permissions else None,
            description=body.description,
            emoji=body.emoji,
            tags=body.tags,
        )
        uow.commit()
    return _view(persona)


@router.get("/agents/{agent_id}")
def get_agent(agent_id: AgentId, database: DatabaseDep) -> AgentView:
    with _answered(), database.unit_of_work() as uow:
        return _view(personas.get(uow, agent_id))


@router.patch("/agents/{agent_id}")
def patch_agent(agent_id: AgentId, body: AgentPatch, database: DatabaseDep) -> AgentView:
    """Change any subset of the fields; the others stay as they are."""
    changes = {field: getattr(body, field) for field in body.model_fields_set}
    if body.permissions is not None:
        changes["permissions"] = body.permissions.stored()
    with _answered(), database.unit_of_work() as uow:
        persona = personas.update(uow, agent_id, changes)
        uow.commit()
    return _view(persona)


@router.delete("/agents/{agent_id}")
def archive_agent(agent_id: AgentId, database: DatabaseDep) -> AgentView:
    """Archive the persona: its sessions and turns point at it, so the row always stays."""
    with _answered(), database.unit_of_work() as uow:
        persona = personas.archive(uow, agent_id)
        uow.commit()
    return _view(persona)


@router.get("/capabilities")
def list_capabilities(graph: NexusDep) -> CapabilityList:
    """The capabilities this deployment knows, in registry order."""
    return CapabilityList(
        items=[
            CapabilityView.model_validate(c, from_attributes=True) for c in graph.capabilities.all()
        ]
    )


@router.put("/agents/{agent_id}/capabilities")
def set_capabilities(agent_id: AgentId, body: CapabilitiesRequest, graph: NexusDep) -> AgentView:
    """Replace the persona's capabilities; the list's order is the order they apply in."""
    with _answered(), graph.database.unit_of_work() as uow:
        persona = personas.set_capabilities(uow, graph.capabilities, agent_id, body.capabilities)
        uow.commit()
    return _view(persona)
