"""The files channel's rows: file bytes under their digest, and the folder's sightings."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, delete, select

from nexus.ids import Clock
from nexus.ledger.repository.dialect_sql import insert_unless_present
from nexus.ledger.repository.tables import events, files, sightings

_PUT = insert_unless_present(files, ["id"])
_SIGHT = insert_unless_present(sightings, ["id"])
_GET = select(files.c.data, files.c.mime_type).where(files.c.id == bindparam("file_id"))
_SIGHTINGS = select(sightings.c.id, sightings.c.seen_at)
_RECORDED = select(events.c.id).where(events.c.id.in_(bindparam("ids", expanding=True)))
_FORGET = delete(sightings).where(sightings.c.id.in_(bindparam("ids", expanding=True)))
# Ids per IN list: a folder of many thousands of files is looked up in slices.
CHUNK = 500


@dataclass(frozen=True)
class FileBytes:
    data: bytes
    mime_type: str | None


def _chunks(ids: Collection[str]) -> Iterator[list[str]]:
    ordered = sorted(ids)
    for start in range(0, len(ordered), CHUNK):
        yield ordered[start : start + CHUNK]


class FileRepository:
    def __init__(self, connection: Connection, clock: Clock) -> None:
        self._conn = connection
        self._clock = clock

    def put(self, file_id: str, data: bytes, mime_type: str | None) -> None:
        """Keep `data` under `file_id` (its digest); the same bytes twice are one row."""
        self._conn.execute(
            _PUT(self._conn),
            {
                "id": file_id,
                "mime_type": mime_type,
                "size": len(data),
                "data": data,
                "created_at": self._clock(),
            },
        )

    def get(self, file_id: str) -> FileBytes | None:
        row = self._conn.execute(_GET, {"file_id": file_id}).one_or_none()
        return None if row is None else FileBytes(bytes(row.data), row.mime_type)

    def recorded(self, event_ids: Collection[str]) -> set[str]:
        """Which of these event ids the ledger holds already."""
        found: set[str] = set()
        for chunk in _chunks(event_ids):
            found.update(self._conn.execute(_RECORDED, {"ids": chunk}).scalars())
        return found

    def sightings(self) -> dict[str, int]:
        """When each folder file seen but not yet recorded was first seen, by its would-be
        event id (only files waiting to settle: recorded ones are forgotten)."""
        return {row.id: int(row.seen_at) for row in self._conn.execute(_SIGHTINGS)}

    def sight(self, ids: Sequence[str], seen_at: int) -> None:
        """Remember these ids as seen at `seen_at`; one seen before keeps its first time."""
        if ids:
            statement = _SIGHT(self._conn)
            self._conn.execute(statement, [{"id": i, "seen_at": seen_at} for i in ids])

    def forget_sightings(self, ids: Collection[str]) -> None:
        for chunk in _chunks(ids):
            self._conn.execute(_FORGET, {"ids": chunk})
