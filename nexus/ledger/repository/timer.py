"""The timer's watermark row, taken FOR UPDATE so concurrent ticks serialise on it."""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from nexus.ids import Clock
from nexus.ledger.repository._sql import upsert_insert
from nexus.ledger.repository.tables import timer_state

NEVER = -1  # the watermark of a timer that never ticked


class TimerRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def lock_watermark(self, name: str) -> int | None:
        """The last minute ticked (None: never), holding the row until the transaction ends.

        The row is created on first use; a second ticker blocks here until the first has
        committed, then reads the watermark the first one advanced."""
        self._conn.execute(
            upsert_insert(self._conn, timer_state)
            .values(name=name, last_minute=NEVER, updated_at=self._clock())
            .on_conflict_do_nothing(index_elements=["name"])
        )
        last = self._conn.execute(
            select(timer_state.c.last_minute).where(timer_state.c.name == name).with_for_update()
        ).scalar_one()
        return None if last == NEVER else int(last)

    def advance(self, name: str, last_minute: int) -> None:
        self._conn.execute(
            update(timer_state)
            .where(timer_state.c.name == name)
            .values(last_minute=last_minute, updated_at=self._clock())
        )
