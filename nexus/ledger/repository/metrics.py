"""Pipeline figures for /metrics, from counts the ledger keeps as its rows change.

Triggers (migration 0006) write a delta row for every change to a counted row; a scrape
folds the deltas written since the last scrape into `metric_totals` and reads the totals.
Its cost follows what happened since the last scrape and the number of label values, never
the size of the ledger.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, delete, insert, select

from nexus.ledger.enums import OPEN_QUEUE_STATUSES
from nexus.ledger.repository._sql import serialize, upsert_insert
from nexus.ledger.repository.tables import deltas, totals

# Seconds: a turn is one model call at best and several tool rounds at worst. The totals
# keep latencies by these buckets, so changing them splits the histogram's history.
LATENCY_BUCKETS_S = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
INF = "+Inf"
SECURITY_EVENTS = "security_events"  # the family of MetricsRepository.count's security events
Key = tuple[str, str, str, str]


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
    delivery_failures: list[tuple[str, str, int]]  # platform, reason, count
    # Model usage (migration 0008): tokens by kind, cost priced at commit, unpriced turns.
    tokens: list[tuple[str, str, str, int]] = field(default_factory=list)  # model, persona, kind
    cost_micros: list[tuple[str, str, int]] = field(default_factory=list)  # model, persona
    unpriced_turns: list[tuple[str, str, int]] = field(default_factory=list)  # model, persona
    # Refusals a tool recorded (a credential kept from a host, an address not reached).
    security_events: list[tuple[str, int]] = field(default_factory=list)  # kind, count


def bucket_of(took_ms: float, bounds_s: Sequence[float]) -> str:
    """The smallest bound (as its label) a latency fits under, else +Inf."""
    at = bisect_left(bounds_s, took_ms / 1000)
    return str(bounds_s[at]) if at < len(bounds_s) else INF


def fold(
    rows: Sequence[tuple[str, str, str, str, int, int]], bounds_s: Sequence[float]
) -> dict[Key, tuple[int, int]]:
    """Deltas summed per total: latencies go to their bucket (each row's ms / n is one
    latency: a trigger's row is one turn, a seed row a group of equal latencies)."""
    summed: dict[Key, list[int]] = defaultdict(lambda: [0, 0])
    for family, a, b, c, n, ms in rows:
        if family == "turn_latency" and n:
            a = bucket_of(ms / n, bounds_s)
        total = summed[(family, a, b, c)]
        total[0] += n
        total[1] += ms
    return {key: (n, ms) for key, (n, ms) in summed.items() if n or ms}


class MetricsRepository:
    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def figures(self, latency_buckets_s: Sequence[float] = LATENCY_BUCKETS_S) -> LedgerFigures:
        """Fold what changed since the last fold, then read the totals (commit after)."""
        self.fold(latency_buckets_s)
        rows = self._conn.execute(
            select(totals.c.family, totals.c.a, totals.c.b, totals.c.c, totals.c.n, totals.c.ms)
        ).all()
        return _figures(
            [(f, a, b, c, int(n), int(ms)) for f, a, b, c, n, ms in rows], latency_buckets_s
        )

    def count(self, family: str, a: str, b: str = "", c: str = "", n: int = 1) -> None:
        """Add to a count no trigger keeps (say, a security event): a delta row, folded like
        the others at the next scrape (commit after)."""
        self._conn.execute(insert(deltas).values(family=family, a=a, b=b, c=c, n=n, ms=0))

    def fold(self, bounds_s: Sequence[float] = LATENCY_BUCKETS_S) -> int:
        """Move the deltas into the totals (each scrape, and every timer tick, so they do
        not pile up where nobody scrapes); returns how many (commit after)."""
        # Deleting with RETURNING takes exactly the deltas this transaction sees; one written
        # meanwhile stays for the next fold. Folds take turns (a scrape and a tick, or two
        # API pods), so they never wait on each other's rows in opposite orders.
        serialize(self._conn, "metric-fold")
        moved = self._conn.execute(
            delete(deltas).returning(
                deltas.c.family, deltas.c.a, deltas.c.b, deltas.c.c, deltas.c.n, deltas.c.ms
            )
        ).all()
        changes = fold([(f, a, b, c, int(n), int(ms)) for f, a, b, c, n, ms in moved], bounds_s)
        for (family, a, b, c), (n, ms) in sorted(changes.items()):  # one lock order
            insert = upsert_insert(self._conn, totals).values(
                family=family, a=a, b=b, c=c, n=n, ms=ms
            )
            self._conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[totals.c.family, totals.c.a, totals.c.b, totals.c.c],
                    set_={
                        "n": totals.c.n + insert.excluded.n,
                        "ms": totals.c.ms + insert.excluded.ms,
                    },
                )
            )
        return len(moved)


def _figures(
    rows: list[tuple[str, str, str, str, int, int]], bounds_s: Sequence[float]
) -> LedgerFigures:
    by: dict[str, list[tuple[str, str, str, int, int]]] = defaultdict(list)
    for family, a, b, c, n, ms in rows:
        by[family].append((a, b, c, n, ms))
    open_statuses = {str(status) for status in OPEN_QUEUE_STATUSES}
    depth: dict[tuple[str, str], int] = defaultdict(int)
    settled: dict[str, int] = defaultdict(int)
    for mode, status, disposition, n, _ in by["queue_items"]:
        if status in open_statuses:
            depth[(mode, status)] += n
        if disposition:
            settled[disposition] += n
    failures: dict[tuple[str, str], int] = defaultdict(int)
    delivered: dict[tuple[str, str], int] = defaultdict(int)
    for platform, status, reason, n, _ in by["deliveries"]:
        delivered[(platform, status)] += n
        if reason:
            failures[(platform, reason)] += n
    per_bucket = {a: n for a, _, _, n, _ in by["turn_latency"]}
    cumulative, running = [], 0
    for bound in bounds_s:
        running += per_bucket.get(str(bound), 0)
        cumulative.append((bound, running))
    return LedgerFigures(
        events=[(a, b, c, n) for a, b, c, n, _ in by["events"]],
        queue_depth=[(m, s, n) for (m, s), n in sorted(depth.items())],
        dispositions=sorted(settled.items()),
        turns=[(a, n) for a, _, _, n, _ in by["turns"]],
        turn_latency=cumulative,
        turn_latency_sum_s=sum(ms for *_, ms in by["turn_latency"]) / 1000,
        turn_latency_count=sum(n for _, _, _, n, _ in by["turn_latency"]),
        deliveries=[(p, s, n) for (p, s), n in sorted(delivered.items())],
        delivery_failures=[(p, r, n) for (p, r), n in sorted(failures.items())],
        tokens=sorted((model, persona, kind, n) for model, persona, kind, n, _ in by["tokens"]),
        cost_micros=sorted((model, persona, n) for model, persona, _, n, _ in by["cost"]),
        unpriced_turns=sorted((model, persona, n) for model, persona, _, n, _ in by["unpriced"]),
        security_events=sorted((kind, n) for kind, _, _, n, _ in by[SECURITY_EVENTS]),
    )
