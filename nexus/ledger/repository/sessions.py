"""Sessions: create, resolve through aliases, claim (fencing epoch), fork, pointer history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Executable, bindparam, case, func, select, update

from nexus.ids import Clock, new_id
from nexus.ledger.enums import SessionOrigin, SessionStatus, TaskStatus
from nexus.ledger.records import NewSession, SessionRecord
from nexus.ledger.repository import driver
from nexus.ledger.repository._sql import columns_for, to_record
from nexus.ledger.repository.errors import LabelTaken, NotForkable, NotFound
from nexus.ledger.repository.session_aliases import SessionAliases
from nexus.ledger.repository.session_lineage import SessionLineage
from nexus.ledger.repository.sessions_sql import (
    LIVE_SESSION_BY_LABEL,
    NEW_SESSION,
    RECORD_MOVE,
    RESOLVE,
    RESOLVE_LOCKING,
    SESSION_BY_ID,
    SESSION_BY_LABEL,
)
from nexus.ledger.repository.tables import sessions, threads, turns


class SessionRepository(SessionAliases, SessionLineage):
    """Sessions: their rows, their heads and epochs; aliases and lineage in the mixins."""

    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    # -- reads -------------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionRecord | None:
        return self._one(SESSION_BY_ID, {"session_id": session_id})

    def get_many(self, session_ids: Sequence[str]) -> dict[str, SessionRecord]:
        """The sessions with these ids, by id (unknown ones left out), in one statement."""
        ids = list(set(session_ids))
        if not ids:
            return {}
        rows = self._conn.execute(
            select(*columns_for(sessions, SessionRecord)).where(sessions.c.id.in_(ids))
        )
        return {row.id: to_record(SessionRecord, row) for row in rows}

    def get_by_label(self, label: str) -> SessionRecord | None:
        """The session with exactly this label, aliases not followed: the live one, else
        the newest deleted session that had it (a deleted session frees its label)."""
        return self._one(SESSION_BY_LABEL, {"label": label})

    def get_live(self, label: str) -> SessionRecord | None:
        """The session that is not deleted with exactly this label; aliases not followed."""
        return self._one(LIVE_SESSION_BY_LABEL, {"label": label})

    def resolve(self, label: str, *, lock: bool = False) -> SessionRecord | None:
        """The session that what is addressed to `label` goes to: its aliases followed first,
        one after another, to a label that is no alias; else the session with the label
        itself; else None. An alias wins over a session with the same label: a merge
        leaves the merged-away sessions in place, and their labels must lead to the
        primary (docs/people.md, "Merges").

        With `lock`, the session found is locked as `lock()` locks it, in the same
        statement in the common case (a label that is no alias)."""
        if "\x00" in label:
            # No stored label can hold NUL (labels refuse control characters, and Postgres
            # text cannot hold it at all); asking the database would fail, not miss.
            return None
        # One statement in the common case: the session with this label, and whether the
        # label is also an alias (which then wins).
        statement = RESOLVE_LOCKING if lock else RESOLVE
        row = driver.one_or_none(self._conn, statement, {"label": label})
        if row is None:
            target = self._alias_target(label)
            if target is None:
                return None
        elif row["onward"] is None:
            fields = dict(row)
            del fields["onward"]
            return SessionRecord.model_validate(fields)
        else:
            target = row["onward"]
        found = self.get_live(self.final_label(target))
        if found is not None and lock:
            self.lock(found.id)
        return found

    def _one(self, query: Executable, params: dict[str, str]) -> SessionRecord | None:
        row = self._conn.execute(query, params).one_or_none()
        return None if row is None else to_record(SessionRecord, row)

    # -- writes ------------------------------------------------------------------------------

    def create(
        self, new: NewSession, *, thread_id: str | None = None, reason: str = "create"
    ) -> SessionRecord:
        """Insert a session; raises LabelTaken when the label (or an alias) is in use."""
        if self._alias_target(new.label) is not None:
            raise LabelTaken(f"{new.label!r} is an alias of another session")
        now = self._clock()
        session_id = new_id()
        values = new.model_dump()
        row = {
            "id": session_id,
            "thread_id": thread_id,
            "epoch": 0,
            "status": SessionStatus.ACTIVE,
            "is_subagent": new.origin == SessionOrigin.SUBAGENT,
            # A worker's task is pending until a run claims its input (BUMP_EPOCH).
            "task_status": TaskStatus.PENDING if new.origin == SessionOrigin.SUBAGENT else None,
            "created_at": now,
            "updated_at": now,
            **values,
        }
        inserted = self._conn.execute(NEW_SESSION(self._conn), row).scalar_one_or_none()
        if inserted is None:
            raise LabelTaken(f"a session labelled {new.label!r} exists already")
        self._record_move(session_id, thread_id, None, 0, reason, now)
        created = self.get(session_id)
        assert created is not None
        return created

    def ensure(self, new: NewSession) -> SessionRecord:
        """Resolve `new.label` (aliases followed) or create it; safe when racing. An alias
        whose session was deleted starts a new session under the label it leads to."""
        found = self.resolve(new.label)
        if found is not None:
            return found
        try:
            return self.create(new)
        except LabelTaken:
            raced = self.resolve(new.label)
            if raced is not None:
                return raced
            target = self.final_label(new.label)
            if target == new.label:
                raise
        # Only an alias gets here (its target deleted): no statement for any other label.
        return self.ensure(new.model_copy(update={"label": target}))

    def page(
        self, *, after_label: str | None, limit: int, persona_id: str | None = None
    ) -> list[SessionRecord]:
        """Up to `limit` sessions in label order, after `after_label` (a keyset page)."""
        query = select(*columns_for(sessions, SessionRecord)).order_by(sessions.c.label)
        if after_label is not None:
            query = query.where(sessions.c.label > after_label)
        if persona_id is not None:
            query = query.where(sessions.c.persona_id == persona_id)
        return [to_record(SessionRecord, row) for row in self._conn.execute(query.limit(limit))]

    def lock(self, session_id: str) -> int:
        """Hold the session's row until the transaction ends, and return its epoch: decisions
        over its whole queue (the cap) are made one at a time, however many routers run
        (SQLite: always), and no claim moves the epoch until this transaction ends.

        FOR NO KEY UPDATE, the lock an UPDATE of the row takes: it does not block the
        foreign-key checks of rows that reference the session (queue items, turns)."""
        found = driver.rows(self._conn, _LOCK, {"session_id": session_id})
        if not found:
            raise NotFound(f"no session with id {session_id!r}")
        return int(found[0]["epoch"])

    def claim(self, session_id: str) -> int:
        """Start a run: bump the fencing epoch and return it. Older epochs can never commit."""
        epoch = self._conn.execute(BUMP_EPOCH, {"bump_session": session_id}).scalar_one_or_none()
        if epoch is None:
            raise NotFound(f"no session with id {session_id!r}")
        return int(epoch)

    def fork_point(self, turn_id: str) -> str | None:
        """The persona a fork of `turn_id` would have; None when the turn cannot be forked
        (it is on no session's chain: unknown, failed or superseded)."""
        found = self._conn.execute(
            select(threads.c.persona_id).where(threads.c.turn_id == turn_id)
        ).scalar_one_or_none()
        return None if found is None else str(found)

    def fork(self, turn_id: str, *, label: str | None = None) -> SessionRecord:
        """A new session whose head is `turn_id`; its persona is the thread's."""
        persona_id = self.fork_point(turn_id)
        if persona_id is None:
            raise NotForkable(
                f"turn {turn_id!r} is not on any session's chain (unknown, failed or "
                "superseded), so it cannot be forked"
            )
        new = NewSession(
            label=label or f"fork-{new_id()}", persona_id=persona_id, origin=SessionOrigin.FORK
        )
        return self.create(new, thread_id=turn_id, reason="fork")

    def configure(self, session_id: str, values: dict[str, object]) -> SessionRecord:
        """Set the session's own queue settings and status (`queue_mode`, `queue_cap`,
        `drop_policy`, `debounce_ms`, `status`), its model configuration
        (`model_overrides`), `title` and `tags`; a None clears a setting back to its
        policy's or the default. Names outside those are a programming error. Archiving or
        deleting sets `finished_at` (kept if set); making it active again clears it."""
        unknown = set(values) - _CONFIGURABLE
        if unknown:
            raise ValueError(f"not a session setting: {sorted(unknown)}")
        now = self._clock()
        finished: dict[str, Any] = {}
        if values.get("status") in (SessionStatus.ARCHIVED, SessionStatus.DELETED):
            finished["finished_at"] = func.coalesce(sessions.c.finished_at, now)
        elif values.get("status") == SessionStatus.ACTIVE:
            finished["finished_at"] = None
        changed = self._conn.execute(
            update(sessions)
            .where(sessions.c.id == session_id)
            .values(**values, **finished, updated_at=now)
            .returning(*columns_for(sessions, SessionRecord))
        ).one_or_none()
        if changed is None:
            raise NotFound(f"no session with id {session_id!r}")
        return to_record(SessionRecord, changed)

    def move_head(
        self,
        session_id: str,
        turn_id: str,
        *,
        epoch: int,
        expected: str | None,
        reason: str,
        abandoned: Sequence[str] = (),
    ) -> bool:
        """Point the session's head at `turn_id`, fenced as a turn commit is: only if its
        epoch is still `epoch` and its head still `expected`. The epoch moves on too, so no
        run claimed before can commit after. The move is kept in the pointer history under
        `reason`; the session's `abandoned` turns (those it went back past) are marked so,
        and kept. False when fenced (nothing written)."""
        now = self._clock()
        moved = self._conn.execute(
            update(sessions)
            .where(sessions.c.id == session_id, sessions.c.epoch == epoch)
            .where(sessions.c.thread_id.is_not_distinct_from(expected))
            .values(thread_id=turn_id, epoch=sessions.c.epoch + 1, updated_at=now)
        )
        if not moved.rowcount:
            return False
        self._record_move(session_id, turn_id, expected, epoch + 1, reason, now)
        if abandoned:
            self._conn.execute(
                update(turns)
                .where(turns.c.id.in_(list(abandoned)), turns.c.session_id == session_id)
                .where(turns.c.abandoned_at.is_(None))
                .values(abandoned_at=now)
            )
        return True

    def _record_move(
        self,
        session_id: str,
        thread_id: str | None,
        previous: str | None,
        epoch: int,
        reason: str,
        now: int,
    ) -> None:
        self._conn.execute(
            RECORD_MOVE,
            {
                "id": new_id(),
                "session_id": session_id,
                "thread_id": thread_id,
                "previous_thread_id": previous,
                "epoch": epoch,
                "reason": reason,
                "changed_at": now,
            },
        )


_CONFIGURABLE = frozenset(
    {
        "queue_mode",
        "queue_cap",
        "drop_policy",
        "debounce_ms",
        "status",
        "model_overrides",
        "title",
        "tags",
    }
)

_LOCK = (
    select(sessions.c.epoch)
    .where(sessions.c.id == bindparam("session_id"))
    .with_for_update(key_share=True)
)

# A run's start: the session's fencing epoch bumped and returned (the queue's one-statement
# claim on Postgres runs it as a CTE). A worker's task is running from then on, in the same
# statement (no cost to other sessions, whose task_status is null); a cancelled task stays
# cancelled, whatever run was already on its way.
# A run's claim of the session: its fencing epoch + 1 (and a worker's task running).
BUMP = (
    update(sessions)
    .where(sessions.c.id == bindparam("bump_session"))
    .values(
        epoch=sessions.c.epoch + 1,
        task_status=case(
            (
                sessions.c.task_status.is_(None) | (sessions.c.task_status == TaskStatus.CANCELLED),
                sessions.c.task_status,
            ),
            else_=TaskStatus.RUNNING.value,
        ),
    )
)
BUMP_EPOCH = BUMP.returning(sessions.c.epoch)
