"""People as the operator manages them: entities (a person, their contacts, the sessions
their direct-message keys lead to) and aliases (another key that leads to a session).

Plain functions over the caller's unit of work (the caller commits). They answer records
and raise the ledger's errors: NotFound, LedgerConflict and the subclasses below.
Merging two people, which also tells the primary session, is `nexus.arrival.messages`'s
`merge_people` over `nexus.people.merge`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nexus.access.keys import dm_key
from nexus.db import UnitOfWork
from nexus.ids import new_id
from nexus.ledger.records import ContactRecord, EntityRecord
from nexus.ledger.repository import LedgerConflict, NotFound
from nexus.ledger.repository.session_aliases import AliasRow

# The reason an alias written by hand records (a merge writes its own).
MANUAL = "manual"


class MergedAway(LedgerConflict):
    """The entity was merged into another: changes go to the person's root."""


class NothingToChange(ValueError):
    """A change that names nothing to change."""


class AliasCycle(LedgerConflict):
    """The alias would lead to itself, directly or through other aliases."""


class AliasExists(LedgerConflict):
    """The key is an alias already."""


# -- entities ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    """An entity with everything of the person it is part of: the entities merged into it,
    their contacts, the sessions their direct-message keys lead to, and last activity."""

    entity: EntityRecord
    merged: list[str]
    contacts: list[ContactRecord]
    sessions: list[str]
    last_seen_at: int | None


def entity_page(
    uow: UnitOfWork, *, after_id: str | None, limit: int, merged: bool = False
) -> list[EntityRecord]:
    """Up to `limit` entities in id order after `after_id`; merged-away ones when asked."""
    return uow.ledger.entities.page(after_id=after_id, limit=limit, merged=merged)


def person(uow: UnitOfWork, entity_id: str) -> Person:
    """One entity with its contacts, sessions and last activity; NotFound if none."""
    return _person(uow, _entity(uow, entity_id))


def create_entity(uow: UnitOfWork, *, name: str, kind: str, owner: bool = False) -> Person:
    """A person (or other entity) to attach contacts to and merge first-contact ones into."""
    created = uow.ledger.identity.create_entity(f"ent_{new_id().lower()}", kind=kind, name=name)
    if owner:
        created = uow.ledger.entities.update(created.id, is_owner=True)
    return _person(uow, created)


def update_entity(
    uow: UnitOfWork, entity_id: str, *, name: str | None = None, owner: bool | None = None
) -> Person:
    """Rename an entity, or make it the owner (or a known person again); the principal
    applies from the next message its contacts send. NothingToChange when neither is
    given, NotFound, MergedAway for an entity merged into another."""
    if name is None and owner is None:
        raise NothingToChange("give a name or a principal")
    _root(uow, entity_id)
    return _person(uow, uow.ledger.entities.update(entity_id, name=name, is_owner=owner))


def attach_contact(uow: UnitOfWork, entity_id: str, platform: str, sender_id: str) -> str | None:
    """Make a platform address this entity's; answers the entity it had before, if another.
    NotFound, MergedAway for an entity merged into another."""
    _root(uow, entity_id)
    return uow.ledger.entities.attach(entity_id, platform, sender_id)


def detach_contact(uow: UnitOfWork, entity_id: str, platform: str, sender_id: str) -> str:
    """Take an address from this entity: it goes back to an entity of its own, whose id
    this answers. NotFound when it is not the entity's; LedgerConflict for the contact
    the entity was created for."""
    return uow.ledger.entities.detach(entity_id, platform, sender_id)


def _entity(uow: UnitOfWork, entity_id: str) -> EntityRecord:
    found = uow.ledger.identity.get_entity(entity_id)
    if found is None:
        raise NotFound(f"no entity {entity_id!r}")
    return found


def _root(uow: UnitOfWork, entity_id: str) -> EntityRecord:
    """The entity, which must not have been merged away: changes go to the person's root."""
    entity = _entity(uow, entity_id)
    if entity.merged_into is not None:
        root = uow.ledger.identity.canonical_entity(entity.id)
        raise MergedAway(f"entity {entity_id!r} was merged into {root!r}: change that one")
    return entity


def _person(uow: UnitOfWork, entity: EntityRecord) -> Person:
    identity = uow.ledger.identity
    group = identity.merge_group(entity.id) if entity.merged_into is None else [entity.id]
    sessions: list[str] = []
    for member in group:
        session = uow.ledger.sessions.resolve(dm_key(member))
        if session is not None and session.label not in sessions:
            sessions.append(session.label)
    return Person(
        entity=entity,
        merged=group[1:],
        contacts=uow.ledger.entities.contacts_of(group),
        sessions=sessions,
        last_seen_at=uow.ledger.entities.last_seen(group),
    )


# -- aliases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alias:
    alias: str
    session: str  # the label it points at
    resolves_to: str | None  # where it leads in the end (aliases followed), if a session
    reason: str | None  # MANUAL, or why a merge wrote it
    created_at: int


def alias_page(uow: UnitOfWork, *, after: str | None, limit: int) -> list[Alias]:
    """Up to `limit` aliases in alias order after `after`."""
    rows = uow.ledger.sessions.alias_page(after=after, limit=limit)
    return [_alias(uow, row) for row in rows]


def alias(uow: UnitOfWork, name: str) -> Alias:
    """One alias and where it leads; NotFound if there is none."""
    row = uow.ledger.sessions.alias(name)
    if row is None:
        raise NotFound(f"no alias {name!r}")
    return _alias(uow, row)


def add_alias(uow: UnitOfWork, name: str, session: str) -> Alias:
    """What is addressed to `name` goes to `session` from now on (to the session it leads
    to, when `session` is an alias itself); an alias wins over a session with its label.
    NotFound for no such session, AliasCycle for a circle, AliasExists when `name` is an
    alias already."""
    if name == session:
        raise AliasCycle(f"{name!r} cannot be an alias of itself")
    sessions = uow.ledger.sessions
    # An alias names a session: one given by another alias is the session it leads to.
    target = sessions.final_label(session)
    if target == name:
        raise AliasCycle(
            f"{name!r} → {session!r} would make a circle: {session!r} leads to {name!r}"
        )
    try:
        added = sessions.add_alias(name, target, reason=MANUAL)
    except LedgerConflict as error:  # a circle the ledger found
        raise AliasCycle(str(error)) from error
    if not added:
        current = sessions.final_label(name)
        raise AliasExists(
            f"{name!r} is an alias already (it leads to {current!r}); remove it first"
        )
    return alias(uow, name)


def remove_alias(uow: UnitOfWork, name: str) -> Alias:
    """Remove an alias (a merge's too): what is addressed to it goes to the session with its
    own label again, or starts one. Answers the alias as it was; NotFound if none."""
    removed = alias(uow, name)
    uow.ledger.sessions.remove_alias(name)
    return removed


def _alias(uow: UnitOfWork, row: AliasRow) -> Alias:
    name, label, reason, created = row
    found = uow.ledger.sessions.resolve(name)
    return Alias(
        alias=name,
        session=label,
        resolves_to=found.label if found is not None else None,
        reason=reason,
        created_at=created,
    )
