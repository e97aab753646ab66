"""Contacts and entities: (platform, sender) → entity, and the merged_into chain."""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update

from nexus.ids import Clock, new_id
from nexus.ledger.records import EntityRecord
from nexus.ledger.repository import driver
from nexus.ledger.repository._sql import columns_for, serialize, to_record, upsert_insert
from nexus.ledger.repository.dialect_sql import PerDialect, insert_unless_present
from nexus.ledger.repository.errors import LedgerConflict, NotFound
from nexus.ledger.repository.tables import contacts, entities

# A merge chain longer than this means a cycle or corruption; refuse rather than spin.
MAX_MERGE_HOPS = 64
# Merges take turns: two at once (a into b, b into a) would each pass the check that the
# other one makes false, and leave a circle of entities.
ENTITY_MERGES = "nexus:entity-merges"


def auto_entity_id(platform: str, sender_id: str) -> str:
    """The id of the entity created on first contact: derived, so racing inserts converge."""
    digest = hashlib.sha256(f"{platform}\x00{sender_id}".encode()).hexdigest()[:24]
    return f"ent_{digest}"


class IdentityRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def touch_contact(self, platform: str, sender_id: str, display_name: str | None) -> str:
        """The contact for (platform, sender), created with its own entity on first sight.

        Returns the contact id. Both inserts are ON CONFLICT DO NOTHING and the entity id is
        derived from the pair, so two first messages racing create one contact and one
        entity between them.
        """
        now = self._clock()
        # Almost every message is from someone seen before: one statement for them.
        seen = driver.one_or_none(
            self._conn,
            _TOUCH,
            {
                "contact_platform": platform,
                "contact_sender": sender_id,
                "seen_at": now,
                "seen_name": display_name,
            },
        )
        if seen is not None:
            return str(seen["id"])
        entity_id = self.ensure_own_entity(platform, sender_id)
        contact_id = self._conn.execute(
            _NEW_CONTACT(self._conn),
            {
                "id": new_id(),
                "platform": platform,
                "sender_id": sender_id,
                "entity_id": entity_id,
                "display_name": display_name,
                "first_seen_at": now,
                "last_seen_at": now,
            },
        ).scalar_one()
        return str(contact_id)

    def ensure_own_entity(self, platform: str, sender_id: str) -> str:
        """The entity a (platform, sender) gets on first contact, created if it is missing
        (its id is derived from the pair, so racing callers converge on one)."""
        entity_id = auto_entity_id(platform, sender_id)
        now = self._clock()
        self._conn.execute(
            _OWN_ENTITY(self._conn),
            {
                "id": entity_id,
                "type": platform,
                "name": f"{platform}:{sender_id}",
                "tags": [],
                "is_owner": False,
                "created_at": now,
                "updated_at": now,
            },
        )
        return entity_id

    def contact_entity(self, platform: str, sender_id: str) -> str | None:
        return self._conn.execute(
            _CONTACT_ENTITY, {"contact_platform": platform, "contact_sender": sender_id}
        ).scalar_one_or_none()

    def sender_entity(self, platform: str, sender_id: str) -> EntityRecord | None:
        """The canonical entity behind a sender: the contact's entity, read with it in one
        statement, then followed through merges when it was merged away (rare)."""
        row = driver.one_or_none(
            self._conn,
            _SENDER_ENTITY,
            {"contact_platform": platform, "contact_sender": sender_id},
        )
        return None if row is None else self.canonical(EntityRecord.model_validate(row))

    def canonical(self, entity: EntityRecord) -> EntityRecord | None:
        """The entity itself, or the one it was merged into (followed to the root)."""
        if entity.merged_into is None:
            return entity
        return self.get_entity(self.canonical_entity(entity.merged_into))

    def canonical_entity(self, entity_id: str) -> str:
        """Follow merged_into to the root entity (union-find without path compression)."""
        current = entity_id
        for _ in range(MAX_MERGE_HOPS):
            parent = self._conn.execute(_MERGED_INTO, {"entity_id": current}).scalar_one_or_none()
            if parent is None:
                return current
            current = parent
        raise RuntimeError(f"entity {entity_id!r} has a merge chain over {MAX_MERGE_HOPS} hops")

    def get_entity(self, entity_id: str) -> EntityRecord | None:
        row = self._conn.execute(_ENTITY, {"entity_id": entity_id}).one_or_none()
        return None if row is None else to_record(EntityRecord, row)

    def create_entity(self, entity_id: str, *, kind: str, name: str) -> EntityRecord:
        now = self._clock()
        inserted = self._conn.execute(
            upsert_insert(self._conn, entities)
            .values(
                id=entity_id,
                type=kind,
                name=name,
                tags=[],
                is_owner=False,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["id"])
            .returning(entities.c.id)
        ).scalar_one_or_none()
        if inserted is None:
            raise LedgerConflict(f"entity {entity_id!r} exists already")
        created = self.get_entity(entity_id)
        assert created is not None
        return created

    def merge(self, merged: str, *, into: str) -> None:
        """Point `merged` at `into` (both must exist; refuses cycles and double merges)."""
        serialize(self._conn, ENTITY_MERGES)
        for entity_id in (merged, into):
            if self.get_entity(entity_id) is None:
                raise NotFound(f"no entity {entity_id!r}")
        if self.canonical_entity(into) == self.canonical_entity(merged):
            raise LedgerConflict(f"{merged!r} and {into!r} are already the same person")
        result = self._conn.execute(
            update(entities)
            .where(entities.c.id == merged, entities.c.merged_into.is_(None))
            .values(merged_into=into, updated_at=self._clock())
        )
        if result.rowcount != 1:
            raise LedgerConflict(f"{merged!r} was merged into another entity already")

    def merge_group(self, entity_id: str) -> list[str]:
        """Every entity whose canonical root is the same as `entity_id`'s, root first."""
        root = self.canonical_entity(entity_id)
        group, frontier = [root], [root]
        while frontier:
            children = list(
                self._conn.execute(
                    select(entities.c.id).where(entities.c.merged_into.in_(frontier))
                ).scalars()
            )
            group.extend(children)
            frontier = children
        return group

    def count_entities(self) -> int:
        return int(self._conn.execute(select(func.count()).select_from(entities)).scalar_one())


# Built once: the router and the webhook run these for every message. A SELECT's parameters
# may be named anything; an UPDATE's must not be named like a column of the table it writes
# (SQLAlchemy would take them as one more SET), so all are named apart from the columns.
_from_sender = (
    contacts.c.platform == bindparam("contact_platform"),
    contacts.c.sender_id == bindparam("contact_sender"),
)
_TOUCH = (
    update(contacts)
    .where(*_from_sender)
    .values(last_seen_at=bindparam("seen_at"), display_name=bindparam("seen_name"))
    .returning(contacts.c.id)
)
_CONTACT_ENTITY = select(contacts.c.entity_id).where(*_from_sender)
_SENDER_ENTITY = (
    select(*columns_for(entities, EntityRecord))
    .select_from(contacts.join(entities, entities.c.id == contacts.c.entity_id))
    .where(*_from_sender)
)
_MERGED_INTO = select(entities.c.merged_into).where(entities.c.id == bindparam("entity_id"))
_ENTITY = select(*columns_for(entities, EntityRecord)).where(
    entities.c.id == bindparam("entity_id")
)


# The inserts take their values by column name at execution, as a plain insert() does.
def _new_contact(connection: Connection) -> Any:
    statement = upsert_insert(connection, contacts)
    return statement.on_conflict_do_update(
        index_elements=["platform", "sender_id"],
        # The inserted row's last_seen_at is this call's now.
        set_={
            "last_seen_at": statement.excluded.last_seen_at,
            "display_name": statement.excluded.display_name,
        },
    ).returning(contacts.c.id)


_NEW_CONTACT = PerDialect(_new_contact)
_OWN_ENTITY = insert_unless_present(entities, ["id"])
