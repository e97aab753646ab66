"""Contacts and entities: (platform, sender) → entity, and the merged_into chain."""

from __future__ import annotations

import hashlib

from sqlalchemy import Connection, select

from nexus.ids import Clock, new_id
from nexus.ledger.models import Contact, Entity, table_of
from nexus.ledger.repository._sql import upsert_insert

contacts = table_of(Contact)
entities = table_of(Entity)

# A merge chain longer than this means a cycle or corruption; refuse rather than spin.
MAX_MERGE_HOPS = 64


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
        entity_id = auto_entity_id(platform, sender_id)
        self._conn.execute(
            upsert_insert(self._conn, entities)
            .values(
                id=entity_id,
                type=platform,
                name=f"{platform}:{sender_id}",
                tags=[],
                is_owner=False,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing(index_elements=["id"])
        )
        statement = upsert_insert(self._conn, contacts).values(
            id=new_id(),
            platform=platform,
            sender_id=sender_id,
            entity_id=entity_id,
            display_name=display_name,
            first_seen_at=now,
            last_seen_at=now,
        )
        contact_id = self._conn.execute(
            statement.on_conflict_do_update(
                index_elements=["platform", "sender_id"],
                set_={
                    "last_seen_at": now,
                    "display_name": statement.excluded.display_name,
                },
            ).returning(contacts.c.id)
        ).scalar_one()
        return str(contact_id)

    def contact_entity(self, platform: str, sender_id: str) -> str | None:
        return self._conn.execute(
            select(contacts.c.entity_id).where(
                contacts.c.platform == platform, contacts.c.sender_id == sender_id
            )
        ).scalar_one_or_none()

    def canonical_entity(self, entity_id: str) -> str:
        """Follow merged_into to the root entity (union-find without path compression)."""
        current = entity_id
        for _ in range(MAX_MERGE_HOPS):
            parent = self._conn.execute(
                select(entities.c.merged_into).where(entities.c.id == current)
            ).scalar_one_or_none()
            if parent is None:
                return current
            current = parent
        raise RuntimeError(f"entity {entity_id!r} has a merge chain over {MAX_MERGE_HOPS} hops")
