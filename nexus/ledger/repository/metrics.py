"""Pipeline figures for /metrics, read from the ledger (the one place every process writes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, case, func, select

from nexus.ledger.enums import QueueStatus
from nexus.ledger.models import Delivery, Event, QueueItem, Turn, table_of

events, queue_items = table_of(Event), table_of(QueueItem)
turns, deliveries = table_of(Turn), table_of(Delivery)


@dataclass(frozen=True)
class LedgerFigures:
    events: list[tuple[str, str, str, int]]  # direction, adapter, disposition, count
    queue_depth: list[tuple[str, str, int]]  # mode, status (queued|claimed), count
    dispositions: list[tuple[str, int]]  # queue item disposition, count
    turns: list[tuple[str, int]]  # status, count (superseded = fenced commits)
    turn_latency: list[tuple[float, int]]  # bucket upper bound (s), turns at or under it
    turn_latency_sum_s: float
    turn_latency_count: int
    deliveries: list[tuple[str, str, int]]  # platform, status, count


class MetricsRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def figures(self, latency_buckets_s: Sequence[float]) -> LedgerFigures:
        event_rows = self._conn.execute(
            select(
                events.c.direction,
                events.c.adapter,
                func.coalesce(events.c.disposition, "pending"),
                func.count(),
            ).group_by(events.c.direction, events.c.adapter, events.c.disposition)
        ).all()
        depth_rows = self._conn.execute(
            select(queue_items.c.mode, queue_items.c.status, func.count())
            .where(queue_items.c.status.in_([QueueStatus.QUEUED, QueueStatus.CLAIMED]))
            .group_by(queue_items.c.mode, queue_items.c.status)
        ).all()
        disposition_rows = self._conn.execute(
            select(queue_items.c.disposition, func.count())
            .where(queue_items.c.disposition.is_not(None))
            .group_by(queue_items.c.disposition)
        ).all()
        turn_rows = self._conn.execute(
            select(turns.c.status, func.count()).group_by(turns.c.status)
        ).all()
        took_ms = turns.c.completed_at - turns.c.started_at
        finished = turns.c.completed_at.is_not(None)
        latency = self._conn.execute(
            select(
                *(
                    func.sum(case((took_ms <= bound * 1000, 1), else_=0))
                    for bound in latency_buckets_s
                ),
                func.coalesce(func.sum(took_ms), 0),
                func.count(),
            ).where(finished)
        ).one()
        delivery_rows = self._conn.execute(
            select(deliveries.c.platform, deliveries.c.status, func.count()).group_by(
                deliveries.c.platform, deliveries.c.status
            )
        ).all()
        counts = list(latency)
        per_bucket = counts[: len(latency_buckets_s)]
        return LedgerFigures(
            events=[(str(d), str(a), str(s), int(n)) for d, a, s, n in event_rows],
            queue_depth=[(str(m), str(s), int(n)) for m, s, n in depth_rows],
            dispositions=[(str(d), int(n)) for d, n in disposition_rows],
            turns=[(str(s), int(n)) for s, n in turn_rows],
            turn_latency=[
                (bound, int(n or 0)) for bound, n in zip(latency_buckets_s, per_bucket, strict=True)
            ],
            turn_latency_sum_s=float(counts[-2] or 0) / 1000,
            turn_latency_count=int(counts[-1] or 0),
            deliveries=[(str(p), str(s), int(n)) for p, s, n in delivery_rows],
        )
