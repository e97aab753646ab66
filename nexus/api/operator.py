"""The operator's routes: dead letters (list, show, replay) and the deployment's status
(workers alive, the timer's last tick, queue depths, dead letters, Redis's eviction policy),
so `nexus status` and `nexus dead-letters` need no database or broker credentials."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import Depends
from pydantic import BaseModel

from nexus.api.deps import NexusDep, v1_router
from nexus.api.errors import ApiError
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.arrival.replay import replay
from nexus.engine.stream_events import QUEUE_ITEM_QUEUED
from nexus.ledger.enums import QueueMode
from nexus.ledger.repository import NotFound
from nexus.ledger.repository.dead_letters import DeadLetter
from nexus.ledger.strings import QueueItemId
from nexus.operations import service as operations
from nexus.timer.tick import WATERMARK

router = v1_router("", "operations", 404, 409)


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
        rows = operations.dead_letter_page(
            uow, before=(int(before[0]), str(before[1])) if before else None, limit=page.limit + 1
        )
    return page_body(rows, page.limit, lambda d: (d.dead_at, d.id), DeadLetterView.of)


@router.get("/v1/dead-letters/{item_id}")
def show_dead_letter(item_id: QueueItemId, graph: NexusDep) -> DeadLetterView:
    """One dead letter: where it was, why it died, its replay if any."""
    try:
        with graph.database.unit_of_work() as uow:
            found = operations.dead_letter(uow, item_id)
    except NotFound as error:
        raise ApiError(404, "not_found", str(error)) from error
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


@router.get("/v1/status")
def status(graph: NexusDep) -> StatusView:
    """Is the deployment running: workers that answer a ping, the timer's last tick, the
    queues, dead letters, Redis's eviction policy; `ok` false with each problem named."""
    found = operations.status(
        graph.database,
        # Asked when the status is: the broker's client is made then, inside the ping's guard.
        worker_ping=lambda timeout_s: graph.worker_ping(timeout_s),
        redis_url=graph.settings.redis_url,
        watermark=WATERMARK,
    )
    now, totals = found.now_ms, found.totals
    return StatusView(
        ok=not found.problems,
        problems=found.problems,
        workers=found.workers,
        beat=BeatView(
            last_tick_at=found.last_tick_at,
            last_minute=found.last_minute,
            age_ms=_age(now, found.last_tick_at),
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
                for d in found.deepest
            ],
        ),
        dead_letters=found.dead,
        dead_letters_unreplayed=found.unreplayed,
        redis_maxmemory_policy=found.maxmemory_policy,
    )
