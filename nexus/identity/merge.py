"""Entity merges and propagateMergeToSessions: aliases, never merged turn trees (seed 002)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from nexus.access.keys import dm_key
from nexus.db import UnitOfWork
from nexus.doorbell import Doorbell
from nexus.ledger.enums import MessageSource, QueueMode
from nexus.ledger.records import NewQueueItem, SessionRecord

MERGE_REASON = "identity_merge"


@dataclass(frozen=True)
class MergeResult:
    root: str
    primary_session: str | None
    aliases_created: tuple[str, ...]


def pick_primary(candidates: Sequence[tuple[SessionRecord, int]]) -> SessionRecord:
    """Seed 002: the session with the most turns; a tie goes to the latest activity."""
    return max(candidates, key=lambda pair: (pair[1], pair[0].updated_at))[0]


def merge_entities(
    uow: UnitOfWork, *, into: str, merged: Sequence[str], doorbell: Doorbell
) -> MergeResult:
    """Merge `merged` into `into` and point every DM key of the person at one session.

    Runs in the caller's transaction, as the seed asks: the merge and its aliases commit
    together or not at all. The primary session is told of the merge with a queued notice.
    """
    if not merged:
        raise ValueError("name at least one entity to merge")
    for entity_id in merged:
        uow.ledger.identity.merge(entity_id, into=into)
    group = uow.ledger.identity.merge_group(into)
    root = group[0]
    existing = [
        (session, uow.ledger.sessions.turn_count(session.id))
        for entity_id in group
        if (session := uow.ledger.sessions.get_by_label(dm_key(entity_id))) is not None
    ]
    if not existing:
        return MergeResult(root=root, primary_session=None, aliases_created=())
    primary = pick_primary(existing)
    created = tuple(
        dm_key(entity_id)
        for entity_id in group
        if dm_key(entity_id) != primary.label
        and uow.ledger.sessions.add_alias(dm_key(entity_id), primary.label, reason=MERGE_REASON)
    )
    notice = (
        f"[identity] {', '.join(merged)} merged into {into}: conversations from every one of "
        f"their channels now continue in this session."
    )
    uow.ledger.queue.enqueue(
        NewQueueItem(
            session_id=primary.id,
            mode=QueueMode.FOLLOWUP,
            source=MessageSource.EVENT,
            payload={"text": notice, "kind": "identity_merge", "aliases": list(created)},
        )
    )
    uow.after_commit(partial(doorbell.session_has_work, primary.id))
    return MergeResult(root=root, primary_session=primary.label, aliases_created=created)
