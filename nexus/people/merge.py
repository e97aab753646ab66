"""Entity merges carried to sessions: aliases to one primary, never merged turn trees."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nexus.access.keys import dm_key
from nexus.db import UnitOfWork
from nexus.ledger.records import SessionRecord

MERGE_REASON = "identity_merge"


@dataclass(frozen=True)
class MergeResult:
    root: str
    primary: SessionRecord | None  # where the person's conversations continue
    aliases_created: tuple[str, ...]  # the keys this merge pointed at the primary
    notice: str = ""  # what the primary is to be told (its caller queues it)

    @property
    def primary_session(self) -> str | None:
        return self.primary.label if self.primary is not None else None


def pick_primary(candidates: Sequence[tuple[SessionRecord, int]]) -> SessionRecord:
    """The session with the most turns; a tie goes to the latest activity (docs/people.md)."""
    return max(candidates, key=lambda pair: (pair[1], pair[0].updated_at))[0]


def merge_entities(uow: UnitOfWork, *, into: str, merged: Sequence[str]) -> MergeResult:
    """Merge `merged` into `into` and point every DM key of the person at one session.

    Every key of the merged group (`dm:{entity}`) then resolves to the primary: the
    session with the most turns among those the keys lead to now. A key with a session of
    its own gets an alias (which wins over the label: that session keeps its history and
    receives nothing more); a key that is an alias already, from an earlier merge, is
    re-pointed. Runs in the caller's transaction: the merge and its aliases commit
    together or not at all. The caller queues `notice` for the primary, in the same
    transaction (`nexus.arrival.messages.queue_notice`).
    """
    if not merged:
        raise ValueError("name at least one entity to merge")
    for entity_id in merged:
        uow.ledger.identity.merge(entity_id, into=into)
    group = uow.ledger.identity.merge_group(into)
    root = group[0]
    sessions = uow.ledger.sessions
    keys = [dm_key(entity_id) for entity_id in group]
    # Where each of the person's keys leads today: its own session, an earlier merge's
    # primary (through its alias), or nowhere yet.
    leads = {key: sessions.resolve(key) for key in keys}
    candidates = {s.id: s for s in leads.values() if s is not None}
    if not candidates:
        return MergeResult(root=root, primary=None, aliases_created=())
    primary = pick_primary([(s, sessions.turn_count(s.id)) for s in candidates.values()])
    written: list[str] = []
    for key in keys:
        session = leads[key]
        if session is not None and session.id == primary.id:
            continue
        # The primary is no alias (resolve ends on a label that is none), so pointing a
        # key straight at it can never close a circle.
        if sessions.final_label(key) != key:
            sessions.repoint_alias(key, primary.label, reason=MERGE_REASON)
        else:
            sessions.add_alias(key, primary.label, reason=MERGE_REASON)
        written.append(key)
    created = tuple(written)
    notice = (
        f"[identity] {', '.join(merged)} merged into {into}: conversations from every one of "
        f"their channels now continue in this session."
    )
    return MergeResult(root=root, primary=primary, aliases_created=created, notice=notice)
