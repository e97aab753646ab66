"""Hooks: the table that follows the hooks directory, breaker state, invocations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from nexus.ids import Clock, new_id
from nexus.ledger.enums import BreakerState
from nexus.ledger.records import HookRecord
from nexus.ledger.repository._sql import columns_for, one_record, past_key, to_record, upsert_insert
from nexus.ledger.repository.tables import hooks, invocations


class HookRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def sync(self, found: Sequence[tuple[str, str, str, str, str | None, str]]) -> list[str]:
        """Make the table follow a hooks directory: (name, path, description, mode,
        schedule, content_hash) per hook found. A hook whose file is gone is disabled, not
        deleted (its invocations stay); a changed file keeps its breaker state, its own
        state and whether it is enabled. Returns the hooks this disabled."""
        now = self._clock()
        names = [name for name, *_ in found]
        for name, path, description, mode, schedule, content_hash in found:
            values = {
                "path": path,
                "description": description,
                "mode": mode,
                "schedule": schedule,
                "content_hash": content_hash,
                "updated_at": now,
            }
            statement = upsert_insert(self._conn, hooks).values(
                name=name,
                enabled=True,
                breaker_state="closed",
                consecutive_errors=0,
                state={},
                created_at=now,
                **values,
            )
            changed = {**values}
            self._conn.execute(
                statement.on_conflict_do_update(index_elements=["name"], set_=changed)
            )
        gone = update(hooks).where(hooks.c.enabled.is_(True))
        if names:
            gone = gone.where(hooks.c.name.not_in(names))
        disabled = self._conn.execute(
            gone.values(enabled=False, updated_at=now).returning(hooks.c.name)
        ).scalars()
        return sorted(disabled)

    def all(self) -> list[HookRecord]:
        rows = self._conn.execute(select(*columns_for(hooks, HookRecord)).order_by(hooks.c.name))
        return [to_record(HookRecord, row) for row in rows]

    def get(self, name: str) -> HookRecord | None:
        return one_record(self._conn, hooks, HookRecord, hooks.c.name == name)

    def lock(self, names: Sequence[str]) -> dict[str, HookRecord]:
        """These hooks' rows, held until the transaction ends (in name order, so two
        callers locking several never wait on each other in a circle): a call's outcome
        is written over the row as it is, not as it was when the call began."""
        rows = self._conn.execute(
            select(*columns_for(hooks, HookRecord))
            .where(hooks.c.name.in_(sorted(set(names))))
            .order_by(hooks.c.name)
            .with_for_update()
        )
        return {record.name: record for record in (to_record(HookRecord, row) for row in rows)}

    def after_call(
        self,
        name: str,
        *,
        breaker_state: str,
        consecutive_errors: int,
        opened_at: int | None,
        state: dict[str, Any],
        enabled: bool,
        fired_at: int | None,
    ) -> None:
        values: dict[str, Any] = {
            "breaker_state": breaker_state,
            "consecutive_errors": consecutive_errors,
            "opened_at": opened_at,
            "state": state,
            "enabled": enabled,
            "updated_at": self._clock(),
        }
        if fired_at is not None:
            values["last_fired_at"] = fired_at
        self._conn.execute(update(hooks).where(hooks.c.name == name).values(values))

    def half_open_cooled(self, *, cool_down_ms: int) -> list[str]:
        """Open breakers whose cool-down has passed become half-open (one trial next)."""
        now = self._clock()
        return list(
            self._conn.execute(
                update(hooks)
                .where(hooks.c.breaker_state == BreakerState.OPEN)
                .where(hooks.c.opened_at <= now - cool_down_ms)
                .values(breaker_state=BreakerState.HALF_OPEN, updated_at=now)
                .returning(hooks.c.name)
            ).scalars()
        )

    def record_invocation(
        self,
        name: str,
        *,
        event_id: str | None,
        started_at: int,
        latency_ms: int,
        fired: bool,
        result: dict[str, Any] | None,
        error: str | None,
    ) -> bool:
        """Record one call of the hook on the event; False, having written nothing, when
        that hook already has its invocation for the event (another run recorded it)."""
        statement = (
            upsert_insert(self._conn, invocations)
            .values(
                id=new_id(),
                hook_name=name,
                event_id=event_id,
                started_at=started_at,
                latency_ms=latency_ms,
                fired=fired,
                result=result,
                error=error,
            )
            .on_conflict_do_nothing(index_elements=["event_id", "hook_name"])
            .returning(invocations.c.id)
        )
        return self._conn.execute(statement).first() is not None

    def invoked(self, event_id: str) -> set[str]:
        """The hooks that have their invocation for the event."""
        return set(
            self._conn.execute(
                select(invocations.c.hook_name).where(invocations.c.event_id == event_id)
            ).scalars()
        )

    def invocations_of(self, name: str) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            select(invocations)
            .where(invocations.c.hook_name == name)
            .order_by(invocations.c.started_at, invocations.c.id)
        )
        return [dict(row._mapping) for row in rows]

    def last_invocation(self, name: str) -> dict[str, Any] | None:
        """The hook's latest invocation (by when it started), or None before its first."""
        row = self._conn.execute(
            select(invocations)
            .where(invocations.c.hook_name == name)
            .order_by(invocations.c.started_at.desc(), invocations.c.id.desc())
            .limit(1)
        ).first()
        return None if row is None else dict(row._mapping)

    def set_enabled(self, name: str, enabled: bool) -> HookRecord | None:
        """Switch a hook on or off by hand; None when there is no such hook. The breaker is
        left as it is: re-enabling does not pretend the errors never happened."""
        self._conn.execute(
            update(hooks)
            .where(hooks.c.name == name)
            .values(enabled=enabled, updated_at=self._clock())
        )
        return self.get(name)

    def invocations_page(
        self, name: str, *, before: tuple[int, str] | None, limit: int
    ) -> list[dict[str, Any]]:
        """Up to `limit` of the hook's invocations, newest first, older than `before`
        ((started_at, id) of the last one already seen): a keyset page."""
        query = (
            select(invocations)
            .where(invocations.c.hook_name == name)
            .order_by(invocations.c.started_at.desc(), invocations.c.id.desc())
            .limit(limit)
        )
        if before is not None:
            query = query.where(
                past_key(invocations.c.started_at, invocations.c.id, before, descending=True)
            )
        return [dict(row._mapping) for row in self._conn.execute(query)]
