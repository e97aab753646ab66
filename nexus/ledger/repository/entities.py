"""Managing people: list, rename and mark entities owner or known; attach and detach contacts."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, func, select, update

from nexus.ids import Clock, new_id
from nexus.ledger.records import ContactRecord, EntityRecord
from nexus.ledger.repository._sql import columns_for, to_record, upsert_insert
from nexus.ledger.repository.errors import LedgerConflict, NotFound
from nexus.ledger.repository.identity import IdentityRepository, auto_entity_id
from nexus.ledger.repository.tables import contacts, entities


class EntityRepository:
    """What a person's record looks like to the people who run Nexus (the router's fast
    lookups stay in IdentityRepository)."""

    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def page(self, *, after_id: str | None, limit: int, merged: bool = False) -> list[EntityRecord]:
        """Up to `limit` entities in id order after `after_id`; merged-away ones only when
        `merged` (they are the same person as their root)."""
        query = select(*columns_for(entities, EntityRecord)).order_by(entities.c.id)
        if after_id is not None:
            query = query.where(entities.c.id > after_id)
        if not merged:
            query = query.where(entities.c.merged_into.is_(None))
        return [to_record(EntityRecord, row) for row in self._conn.execute(query.limit(limit))]

    def contacts_of(self, entity_ids: Sequence[str]) -> list[ContactRecord]:
        """The contacts of these entities, most recently seen first."""
        if not entity_ids:
            return []
        rows = self._conn.execute(
            select(*columns_for(contacts, ContactRecord))
            .where(contacts.c.entity_id.in_(list(entity_ids)))
            .order_by(contacts.c.last_seen_at.desc(), contacts.c.id)
        )
        return [to_record(ContactRecord, row) for row in rows]

    def last_seen(self, entity_ids: Sequence[str]) -> int | None:
        """When any of these entities' contacts last wrote (Unix ms); None if never."""
        if not entity_ids:
            return None
        found = self._conn.execute(
            select(func.max(contacts.c.last_seen_at)).where(
                contacts.c.entity_id.in_(list(entity_ids))
            )
        ).scalar_one_or_none()
        return None if found is None else int(found)

    def update(
        self, entity_id: str, *, name: str | None = None, is_owner: bool | None = None
    ) -> EntityRecord:
        """Rename an entity or make it an owner (or a known person again)."""
        values: dict[str, object] = {"updated_at": self._clock()}
        if name is not None:
            values["name"] = name
        if is_owner is not None:
            values["is_owner"] = is_owner
        changed = self._conn.execute(
            update(entities)
            .where(entities.c.id == entity_id)
            .values(**values)
            .returning(*columns_for(entities, EntityRecord))
        ).one_or_none()
        if changed is None:
            raise NotFound(f"no entity {entity_id!r}")
        return to_record(EntityRecord, changed)

    def attach(self, entity_id: str, platform: str, sender_id: str) -> str | None:
        """Make (platform, sender) a contact of `entity_id`, creating the contact or moving
        it from the entity it had; returns that earlier entity (None: new or unchanged)."""
        self._require(entity_id)
        previous = self._conn.execute(
            select(contacts.c.entity_id).where(
                contacts.c.platform == platform, contacts.c.sender_id == sender_id
            )
        ).scalar_one_or_none()
        if previous == entity_id:
            return None
        now = self._clock()
        if previous is None:
            self._conn.execute(
                upsert_insert(self._conn, contacts)
                .values(
                    id=new_id(),
                    platform=platform,
                    sender_id=sender_id,
                    entity_id=entity_id,
                    display_name=None,
                    first_seen_at=now,
                    last_seen_at=now,
                )
                .on_conflict_do_update(
                    index_elements=["platform", "sender_id"], set_={"entity_id": entity_id}
                )
            )
            return None
        self._move(platform, sender_id, entity_id)
        return str(previous)

    def detach(self, entity_id: str, platform: str, sender_id: str) -> str:
        """Take (platform, sender) from `entity_id`: it goes back to an entity of its own,
        as on first contact (created again if need be). Returns that entity's id."""
        current = self._conn.execute(
            select(contacts.c.entity_id).where(
                contacts.c.platform == platform, contacts.c.sender_id == sender_id
            )
        ).scalar_one_or_none()
        if current != entity_id:
            raise NotFound(f"{platform}:{sender_id} is not a contact of {entity_id!r}")
        if auto_entity_id(platform, sender_id) == entity_id:
            raise LedgerConflict(
                f"{platform}:{sender_id} is the contact {entity_id!r} was created for; "
                "attach it to another entity instead"
            )
        own = IdentityRepository(self._conn, self._clock).ensure_own_entity(platform, sender_id)
        self._move(platform, sender_id, own)
        return own

    def _move(self, platform: str, sender_id: str, entity_id: str) -> None:
        self._conn.execute(
            update(contacts)
            .where(contacts.c.platform == platform, contacts.c.sender_id == sender_id)
            .values(entity_id=entity_id)
        )

    def _require(self, entity_id: str) -> None:
        found = self._conn.execute(
            select(entities.c.id).where(entities.c.id == entity_id)
        ).scalar_one_or_none()
        if found is None:
            raise NotFound(f"no entity {entity_id!r}")
