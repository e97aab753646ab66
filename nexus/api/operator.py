"""The operator's routes: dead letters (list, show, replay) and the deployment's status
(workers alive, the timer's last tick, queue depths, dead letters, Redis's eviction policy),
so `nexus status` and `nexus dead-letters` need no database or broker credentials."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from nexus.api.deps import AUTHENTICATED, NexusDep
from nexus.api.errors import ApiError, error_responses
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.arrival.replay import replay
from nexus.bootstrap import Nexus
from nexus.engine.stream import QUEUE_ITEM_QUEUED
from nexus.ledger.enums import QueueMode
from nexus.ledger.repository import NotFound
from nexus.ledger.repository.dead_letters import DeadLetter
from nexus.ledger.strings import QueueItemId
from nexus.operations.status import PING_TIMEOUT_S, Facts, problems
from nexus.settings import Settings
from nexus.timer.tick import WATERMARK

router = APIRouter(
    tags=["operations"], dependencies=AUTHENTICATED, responses=error_responses(404, 409)
)
# How many of the deepest queues the status lists by name.
DEEPEST = 10


class DeadLetterView(BaseModel):
    id: str
    session: str
    event_id: str | None
    mode: str
    attempts: int
    detail: str | None  # why it died
    text: str | None
    enqueued_at: int
    dead_at: int
    replayed_as: str | None  # the queue item that replays it, once replayed

    @classmethod
    def of(cls, dead: DeadLetter) -> DeadLetterView:
        return cls.model_validate(dead, from_attributes=True)


class ReplayView(BaseModel):
    dead_letter: str
    queue_item_id: str
    session: str
    event_id: str | None
    created: bool  # False: it had been replayed before, as queue_item_id


@router.get("/v1/dead-letters")
def list_dead_letters(
    graph: NexusDep, page: Annotated[PageRequest, Depends(page_request)]
) -> Page[DeadLetterView]:
    """Dead-lettered queue items, the most recently dead first, a page at a time."""
    before = decode_cursor(page.cursor, [int, str])
    with graph.database.unit_of_work() as uow:
        rows = uow.ledger.dead_letters.page(
            before=(int(before[0]), str(before[1])) if before else None, limit=page.limit + 1
        )
    return page_body(rows, page.limit, lambda d: (d.dead_at, d.id), DeadLetterView.of)


@router.get("/v1/dead-letters/{item_id}")
def show_dead_letter(item_id: QueueItemId, graph: NexusDep) -> DeadLetterView:
    """One dead letter: where it was, why it died, its replay if any."""
    with graph.database.unit_of_work() as uow:
        found = uow.ledger.dead_letters.get(item_id)
    if found is None:
        raise ApiError(404, "not_found", f"no dead-lettered queue item {item_id!r}")
    return DeadLetterView.of(found)


@router.post("/v1/dead-letters/{item_id}/replay")
def replay_dead_letter(item_id: QueueItemId, graph: NexusDep) -> ReplayView:
    """Put a dead letter's input back in its session's queue as a new item (the dead one
    keeps its disposition); a second replay answers with the first. An archived session's
    item is 409, and nothing is written."""
    with graph.database.unit_of_work() as uow:
        try:
            done = replay(
                uow,
                item_id,
                graph.doorbell,
                arrivals=graph.coordination,
                queueing=graph.queue_policy,
            )
        except NotFound as error:
            raise ApiError(404, "not_found", str(error)) from error
        if done.created:
            queued = {
                "queue_item_id": done.queue_item_id,
                "event_id": done.event_id,
                "mode": QueueMode.QUEUE.value,
            }
            uow.after_commit(
                partial(graph.coordination.publish, done.session_id, QUEUE_ITEM_QUEUED, queued)
            )
        uow.commit()
    return ReplayView(
        dead_letter=done.dead_id,
        queue_item_id=done.queue_item_id,
        session=done.session,
        event_id=done.event_id,
        created=done.created,
    )


class BeatView(BaseModel):
    last_tick_at: int | None  # when the timer's watermark last moved
    last_minute: int | None  # the last minute it ticked
    age_ms: int | None


class DepthView(BaseModel):
    session: str
    queued: int
    claimed: int
    oldest_age_ms: int | None


class QueuesView(BaseModel):
    queued: int
    claimed: int
    sessions: int
    oldest_age_ms: int | None
    deepest: list[DepthView]


class StatusView(BaseModel):
    ok: bool
    problems: list[str]
    workers: list[str] | None  # those that answered a ping; None: the broker was not reached
    beat: BeatView
    queues: QueuesView
    dead_letters: int
    dead_letters_unreplayed: int
    redis_maxmemory_policy: str | None  # None: no Redis (embedded), or it would not say


def _age(now: int, then: int | None) -> int | None:
    return None if then is None else max(0, now - then)


def _maxmemory_policy(settings: Settings) -> tuple[str | None, str | None]:
    """Redis's eviction policy, or why it is not known (None, None: no Redis)."""
    if settings.redis_url is None:
        return None, None
    import redis

    try:
        found = redis.Redis.from_url(settings.redis_url, socket_timeout=2).config_get(
            "maxmemory-policy"
        )
    except redis.ResponseError:  # CONFIG is renamed or refused (a managed Redis)
        return None, None
    except redis.RedisError as error:
        return None, f"unreachable ({type(error).__name__})"
    value = found.get("maxmemory-policy") if isinstance(found, dict) else None
    return (str(value) if value is not None else None), None


def _workers(graph: Nexus) -> tuple[list[str] | None, str | None]:
    try:
        return graph.worker_ping(PING_TIMEOUT_S), None
    except Exception as error:  # an unreachable broker is an answer, not a 500
        return None, f"{type(error).__name__}: {error}"


@router.get("/v1/status")
def status(graph: NexusDep) -> StatusView:
    """Is the deployment running: workers that answer a ping, the timer's last tick, the
    queues, dead letters, Redis's eviction policy; `ok` false with each problem named."""
    workers, workers_error = _workers(graph)
    policy, redis_error = _maxmemory_policy(graph.settings)
    with graph.database.unit_of_work() as uow:
        now = uow.ledger.clock()
        ledger = uow.ledger.dead_letters
        tick = ledger.last_tick(WATERMARK)
        totals = ledger.queue_totals()
        deepest = ledger.queue_depths(limit=DEEPEST)
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
    return StatusView(
        ok=not found,
        problems=found,
        workers=workers,
        beat=BeatView(
            last_tick_at=last_tick_at, last_minute=last_minute, age_ms=_age(now, last_tick_at)
        ),
        queues=QueuesView(
            queued=totals["queued"],
            claimed=totals["claimed"],
            sessions=totals["sessions"],
            oldest_age_ms=_age(now, totals["oldest_queued_at"]),
            deepest=[
                DepthView(
                    session=d.session,
                    queued=d.queued,
                    claimed=d.claimed,
                    oldest_age_ms=_age(now, d.oldest_queued_at),
                )
                for d in deepest
            ],
        ),
        dead_letters=dead,
        dead_letters_unreplayed=unreplayed,
        redis_maxmemory_policy=policy,
    )
