"""Session keys (DESIGN §5): the stable labels sessions are found by."""

from __future__ import annotations

from nexus.ids import new_id


def dm_key(entity_id: str) -> str:
    """A direct conversation, keyed by the person (their canonical entity), not the channel."""
    return f"dm:{entity_id}"


def group_key(platform: str, container_id: str, thread_id: str | None = None) -> str:
    """A group or channel; a platform thread or forum topic inside it is its own session."""
    key = f"group:{platform}:{container_id}"
    return f"{key}:thread:{thread_id}" if thread_id else key


def worker_key(ulid: str | None = None) -> str:
    return f"worker:{ulid or new_id()}"


def system_key(purpose: str) -> str:
    return f"system:{purpose}"
