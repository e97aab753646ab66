"""Session keys: the stable labels sessions are found by (docs/people.md)."""

from __future__ import annotations

from nexus.ids import new_id


def dm_key(entity_id: str) -> str:
    """A direct conversation, keyed by the person (their canonical entity), not the channel."""
    return f"dm:{entity_id}"


def worker_key(ulid: str | None = None) -> str:
    return f"worker:{ulid or new_id()}"


def system_key(purpose: str) -> str:
    return f"system:{purpose}"
