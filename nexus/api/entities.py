"""/v1/entities: people, their contacts and sessions, owner or known; merging two records."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from nexus.api.deps import DatabaseDep, NexusDep, v1_router
from nexus.api.errors import Answers, answering
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.arrival.messages import merge_people
from nexus.ledger.records import EntityRecord
from nexus.ledger.repository import LedgerConflict, NotFound
from nexus.ledger.strings import EntityId, EntityKind, Key, Platform, SenderId
from nexus.people import service as people
from nexus.people.service import NothingToChange

router = v1_router("/v1/entities", "entities", 404, 409)

Principal = Literal["owner", "known"]
Name = Annotated[str, Key(200, "an entity name")]


class MergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    into: EntityId
    merge: list[EntityId] = Field(min_length=1)


class MergeResponse(BaseModel):
    root: str
    primary_session: str | None
    aliases_created: list[str]


class CreateEntity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    principal: Principal = "known"
    kind: EntityKind = "person"


class UpdateEntity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    principal: Principal | None = None


class ContactRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    platform: Platform
    sender_id: SenderId


class ContactView(BaseModel):
    platform: str
    sender_id: str
    entity_id: str
    display_name: str | None
    first_seen_at: int
    last_seen_at: int


class EntityView(BaseModel):
    id: str
    kind: str
    name: str
    principal: Principal
    merged_into: str | None
    tags: list[str]


class EntityDetail(EntityView):
    """An entity with everything of the person it is part of: the entities merged into it,
    their contacts, the sessions their direct-message keys lead to, and last activity."""

    merged: list[str]
    contacts: list[ContactView]
    sessions: list[str]
    last_seen_at: int | None


class ContactAttached(BaseModel):
    contact: ContactRef
    entity_id: str
    previous_entity_id: str | None


class ContactDetached(BaseModel):
    contact: ContactRef
    entity_id: str  # the entity of its own it went back to


def _view(entity: EntityRecord) -> EntityView:
    return EntityView(
        id=entity.id,
        kind=entity.type,
        name=entity.name,
        principal="owner" if entity.is_owner else "known",
        merged_into=entity.merged_into,
        tags=list(entity.tags),
    )


def _detail(found: people.Person) -> EntityDetail:
    return EntityDetail(
        **_view(found.entity).model_dump(),
        merged=found.merged,
        contacts=[ContactView(**contact.model_dump(exclude={"id"})) for contact in found.contacts],
        sessions=found.sessions,
        last_seen_at=found.last_seen_at,
    )


# The people service's errors as the API answers them.
_ANSWERS: Answers = {
    NotFound: (404, "not_found"),
    LedgerConflict: (409, "conflict"),
    NothingToChange: (400, "nothing_to_change"),
}


@router.get("")
def list_entities(
    database: DatabaseDep,
    page: Annotated[PageRequest, Depends(page_request)],
    merged: Annotated[bool, Query(description="Include entities merged into others.")] = False,
) -> Page[EntityView]:
    """Entities in id order; merged-away ones only when asked for."""
    after = decode_cursor(page.cursor, [str])
    with database.reading() as uow:
        rows = people.entity_page(
            uow, after_id=str(after[0]) if after else None, limit=page.limit + 1, merged=merged
        )
    return page_body(rows, page.limit, lambda e: (e.id,), _view)


@router.post("", status_code=201)
def create_entity(body: CreateEntity, database: DatabaseDep) -> EntityDetail:
    """A person (or other entity) to attach contacts to and merge first-contact ones into."""
    with database.unit_of_work() as uow:
        created = people.create_entity(
            uow, name=body.name, kind=body.kind, owner=body.principal == "owner"
        )
        uow.commit()
    return _detail(created)


@router.post("/merge")
def merge(body: MergeRequest, graph: NexusDep) -> MergeResponse:
    """These entities are one person: their DM sessions get aliases to one primary, which
    is told with a queued notice."""
    with answering(_ANSWERS), graph.database.unit_of_work() as uow:
        result = merge_people(
            uow,
            into=body.into,
            merged=body.merge,
            doorbell=graph.doorbell,
            arrivals=graph.coordination,
            queueing=graph.queue_policy,
        )
        uow.commit()
    return MergeResponse(
        root=result.root,
        primary_session=result.primary_session,
        aliases_created=list(result.aliases_created),
    )


@router.get("/{entity_id}")
def show_entity(entity_id: EntityId, database: DatabaseDep) -> EntityDetail:
    """One entity with its contacts, sessions and last activity."""
    with answering(_ANSWERS), database.reading() as uow:
        return _detail(people.person(uow, entity_id))


@router.patch("/{entity_id}")
def update_entity(entity_id: EntityId, body: UpdateEntity, database: DatabaseDep) -> EntityDetail:
    """Rename an entity, or make it the owner (or a known person again). The principal
    applies from the next message its contacts send."""
    owner = None if body.principal is None else body.principal == "owner"
    with answering(_ANSWERS), database.unit_of_work() as uow:
        updated = people.update_entity(uow, entity_id, name=body.name, owner=owner)
        uow.commit()
    return _detail(updated)


@router.post("/{entity_id}/contacts", status_code=201)
def attach_contact(entity_id: EntityId, body: ContactRef, database: DatabaseDep) -> ContactAttached:
    """Make a platform address this entity's: messages from it route as this person's
    from the next one on. An address that had an entity of its own leaves it (its
    conversation stays where it was; merge the entities instead to carry it over)."""
    with answering(_ANSWERS), database.unit_of_work() as uow:
        previous = people.attach_contact(uow, entity_id, body.platform, body.sender_id)
        uow.commit()
    return ContactAttached(contact=body, entity_id=entity_id, previous_entity_id=previous)


@router.delete("/{entity_id}/contacts")
def detach_contact(
    entity_id: EntityId,
    database: DatabaseDep,
    platform: Annotated[Platform, Query()],
    sender_id: Annotated[SenderId, Query()],
) -> ContactDetached:
    """Take an address from this entity: it goes back to an entity of its own."""
    contact = ContactRef(platform=platform, sender_id=sender_id)
    with answering(_ANSWERS), database.unit_of_work() as uow:
        own = people.detach_contact(uow, entity_id, platform, sender_id)
        uow.commit()
    return ContactDetached(contact=contact, entity_id=own)
