"""What the operator's routes read: readiness, the ledger's figures for /metrics, dead
letters, and the deployment's status (workers, the timer's last tick, queues, Redis).

Functions over the caller's unit of work, except readiness and the status, which ask the
database, the workers and Redis themselves: the workers' ping and Redis are not waited on
inside a transaction. The timer's watermark is named by the caller (`nexus.timer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from nexus.db import Database, UnitOfWork
from nexus.ledger.repository import NotFound
from nexus.ledger.repository.dead_letters import DeadLetter, SessionDepth
from nexus.ledger.repository.metrics import LedgerFigures
from nexus.operations.status import PING_TIMEOUT_S, Facts, WorkerPing, problems

# How many of the deepest queues the status lists by name.
DEEPEST = 10


def readiness(database: Database, redis_url: str | None) -> dict[str, str]:
    """What was checked, each "ok" or "failed: <why>": the ledger answers, and Redis when
    one is configured."""
    checks: dict[str, str] = {}
    try:
        with database.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as error:  # any failure means not ready; the reason is the answer
        checks["database"] = f"failed: {type(error).__name__}"
    if redis_url:
        import redis

        try:
            redis.Redis.from_url(redis_url, socket_timeout=2).ping()
            checks["redis"] = "ok"
        except redis.RedisError as error:
            checks["redis"] = f"failed: {type(error).__name__}"
    return checks


@dataclass(frozen=True)
class LedgerReading:
    """The ledger's counts, the timer's last tick, and the dead letters (all, unreplayed)."""

    figures: LedgerFigures
    last_tick: tuple[int, int] | None  # (last minute, written at); None: never ticked
    dead: int
    unreplayed: int


def ledger_reading(uow: UnitOfWork, *, watermark: str) -> LedgerReading:
    """Figures for a scrape; they fold what changed since the last one, so commit after."""
    figures = uow.ledger.metrics.figures()
    tick = uow.ledger.dead_letters.last_tick(watermark)
    dead, unreplayed = uow.ledger.dead_letters.count()
    return LedgerReading(figures, tick, dead, unreplayed)


def fold_metrics(uow: UnitOfWork) -> int:
    """Fold the counters' deltas into their totals (each tick does, even where nobody
    scrapes /metrics, so the deltas stay few); how many it folded. Commit after."""
    return uow.ledger.metrics.fold()


class DeadLetterNotFound(NotFound):
    def __init__(self, item_id: str) -> None:
        super().__init__(f"no dead-lettered queue item {item_id!r}")


def dead_letter_page(
    uow: UnitOfWork, *, before: tuple[int, str] | None, limit: int
) -> list[DeadLetter]:
    """Up to `limit` dead letters, the most recently dead first, after `before` (the
    `(dead_at, id)` of the last one seen)."""
    return uow.ledger.dead_letters.page(before=before, limit=limit)


def dead_letter(uow: UnitOfWork, item_id: str) -> DeadLetter:
    """One dead letter: where it was, why it died, its replay if any."""
    found = uow.ledger.dead_letters.get(item_id)
    if found is None:
        raise DeadLetterNotFound(item_id)
    return found


@dataclass(frozen=True)
class Status:
    """The deployment as found now, and each problem with it in words (none: all is well)."""

    now_ms: int
    problems: list[str]
    workers: list[str] | None  # those that answered a ping; None: the broker was not reached
    last_minute: int | None  # the timer's last tick
    last_tick_at: int | None
    totals: dict[str, Any]  # open queue items: queued, claimed, sessions, oldest_queued_at
    deepest: list[SessionDepth]
    dead: int
    unreplayed: int
    maxmemory_policy: str | None  # None: no Redis, or it would not say


def status(
    database: Database,
    *,
    worker_ping: WorkerPing,
    redis_url: str | None,
    watermark: str,
    deepest: int = DEEPEST,
) -> Status:
    """Ask the workers (a ping), Redis (its eviction policy) and the ledger, and decide
    what is wrong (`nexus.operations.status.problems`)."""
    workers, workers_error = _workers(worker_ping)
    policy, redis_error = _maxmemory_policy(redis_url)
    with database.unit_of_work() as uow:
        now = uow.ledger.clock()
        ledger = uow.ledger.dead_letters
        tick = ledger.last_tick(watermark)
        totals = ledger.queue_totals()
        depths = ledger.queue_depths(limit=deepest)
        dead, unreplayed = ledger.count()
    last_minute, last_tick_at = tick if tick is not None else (None, None)
    found = problems(
        Facts(
            now_ms=now,
            workers=workers,
            workers_error=workers_error,
            last_tick_at=last_tick_at,
            maxmemory_policy=policy,
            redis_error=redis_error,
        )
    )
    return Status(
        now_ms=now,
        problems=found,
        workers=workers,
        last_minute=last_minute,
        last_tick_at=last_tick_at,
        totals=totals,
        deepest=depths,
        dead=dead,
        unreplayed=unreplayed,
        maxmemory_policy=policy,
    )


def _workers(worker_ping: WorkerPing) -> tuple[list[str] | None, str | None]:
    try:
        return worker_ping(PING_TIMEOUT_S), None
    except Exception as error:  # an unreachable broker is an answer, not a 500
        return None, f"{type(error).__name__}: {error}"


def _maxmemory_policy(redis_url: str | None) -> tuple[str | None, str | None]:
    """Redis's eviction policy, or why it is not known (None, None: no Redis)."""
    if redis_url is None:
        return None, None
    import redis

    try:
        found = redis.Redis.from_url(redis_url, socket_timeout=2).config_get("maxmemory-policy")
    except redis.ResponseError:  # CONFIG is renamed or refused (a managed Redis)
        return None, None
    except redis.RedisError as error:
        return None, f"unreachable ({type(error).__name__})"
    value = found.get("maxmemory-policy") if isinstance(found, dict) else None
    return (str(value) if value is not None else None), None
