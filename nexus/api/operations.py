"""Operations endpoints: liveness, readiness (database and Redis), Prometheus metrics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from pydantic import BaseModel

from nexus.api.deps import ApiState, DatabaseDep, SettingsDep, api_state
from nexus.api.errors import ApiError
from nexus.db import Database
from nexus.ledger.repository.metrics import LedgerFigures
from nexus.operations import service as operations
from nexus.telemetry import REGISTRY
from nexus.timer.tick import WATERMARK

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str  # ready | not ready
    checks: dict[str, str]  # what was checked: "ok", or "failed: <why>"


@router.get("/healthz")
def healthz() -> Health:
    """The process answers (liveness); says nothing about what it depends on."""
    return Health(status="ok")


@router.get("/readyz", responses={503: {"model": Readiness, "description": "Not ready"}})
def readyz(database: DatabaseDep, settings: SettingsDep, response: Response) -> Readiness:
    """Ready to take traffic: the ledger answers, and Redis when one is configured."""
    checks = operations.readiness(database, settings.redis_url)
    ready = all(value == "ok" for value in checks.values())
    response.status_code = 200 if ready else 503
    return Readiness(status="ready" if ready else "not ready", checks=checks)


class LedgerCollector(Collector):
    """Figures read from the ledger at scrape time: every process writes there, so one
    API process reports the whole pipeline, workers included. The ledger keeps them as
    counts (nexus/ledger/repository/metrics.py), so a scrape costs the same at any size."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def collect(self) -> Iterator[Any]:
        with self._database.unit_of_work() as uow:
            reading = operations.ledger_reading(uow, watermark=WATERMARK)
            uow.commit()  # the deltas it folded into the totals
        figures = reading.figures
        yield from _liveness(reading.last_tick, reading.dead, reading.unreplayed)
        ingested = CounterMetricFamily(
            "nexus_events", "Events recorded, by direction, adapter and disposition.",
            labels=["direction", "adapter", "disposition"],
        )  # fmt: skip
        for direction, adapter, disposition, count in figures.events:
            ingested.add_metric([direction, adapter, disposition], count)
        yield ingested
        depth = GaugeMetricFamily(
            "nexus_queue_depth", "Queue items waiting or claimed, by mode and status.",
            labels=["mode", "status"],
        )  # fmt: skip
        for mode, status, count in figures.queue_depth:
            depth.add_metric([mode, status], count)
        yield depth
        settled = CounterMetricFamily(
            "nexus_queue_items_settled", "Queue items by final disposition (dead_lettered: dead "
            "letters).", labels=["disposition"],
        )  # fmt: skip
        for disposition, count in figures.dispositions:
            settled.add_metric([disposition], count)
        yield settled
        made = CounterMetricFamily(
            "nexus_turns", "Turns by status (superseded: fenced commits).", labels=["status"]
        )
        for status, count in figures.turns:
            made.add_metric([status], count)
        yield made
        latency = HistogramMetricFamily(
            "nexus_turn_latency_seconds", "Time from a turn's start to its end."
        )
        buckets = [(str(bound), count) for bound, count in figures.turn_latency]
        buckets.append(("+Inf", figures.turn_latency_count))
        latency.add_metric([], buckets, sum_value=figures.turn_latency_sum_s)
        yield latency
        sent = CounterMetricFamily(
            "nexus_deliveries",
            "Reply chunks by platform and status.",
            labels=["platform", "status"],
        )
        for platform, status, count in figures.deliveries:
            sent.add_metric([platform, status], count)
        yield sent
        failed = CounterMetricFamily(
            "nexus_delivery_failures",
            "Reply chunks that failed for good, by platform and reason (refused: the platform "
            "said no; gave_up: retries ran out; unknown: the sender stopped mid-send; abandoned: "
            "an earlier chunk of the reply failed).",
            labels=["platform", "reason"],
        )
        for platform, reason, count in figures.delivery_failures:
            failed.add_metric([platform, reason], count)
        yield failed
        yield from _usage(figures)
        refused = CounterMetricFamily(
            "nexus_security_events", "What a tool refused to do, by kind (credential_refused: "
            "a credential kept from a host it does not declare; address_refused: a private, "
            "loopback, metadata or own address not fetched).", labels=["kind"],
        )  # fmt: skip
        for kind, count in figures.security_events:
            refused.add_metric([kind], count)
        yield refused


def _liveness(tick: tuple[int, int] | None, dead: int, unreplayed: int) -> Iterator[Any]:
    """What the alerts watch besides the counts: the timer's last tick, the dead letters."""
    ticked = GaugeMetricFamily(
        "nexus_timer_last_tick_timestamp_seconds", "When the timer (`nexus beat`) last "
        "ticked, as a Unix time; absent until it first ticks.",
    )  # fmt: skip
    if tick is not None:
        ticked.add_metric([], tick[1] / 1000)
    yield ticked
    letters = GaugeMetricFamily(
        "nexus_dead_letters", "Dead letters kept, by whether they were replayed.",
        labels=["replayed"],
    )  # fmt: skip
    letters.add_metric(["false"], unreplayed)
    letters.add_metric(["true"], dead - unreplayed)
    yield letters


def _usage(figures: LedgerFigures) -> Iterator[Any]:
    """Model usage: tokens by kind, and cost as priced when each turn committed."""
    tokens = CounterMetricFamily(
        "nexus_model_tokens", "Model tokens used by turns and compactions, by model, persona "
        "and kind (input, output, cache_read, cache_write).", labels=["model", "persona", "kind"],
    )  # fmt: skip
    for model, persona, kind, count in figures.tokens:
        tokens.add_metric([model, persona, kind], count)
    yield tokens
    cost = CounterMetricFamily(
        "nexus_model_cost_usd", "What the model usage cost (USD, as priced when each turn "
        "committed), by model and persona; unpriced turns are not in it.",
        labels=["model", "persona"],
    )  # fmt: skip
    for model, persona, micros in figures.cost_micros:
        cost.add_metric([model, persona], micros / 1_000_000)
    yield cost
    unpriced = CounterMetricFamily(
        "nexus_model_unpriced_turns", "Turns with tokens but no price (a model the price table "
        "does not know), by model and persona.", labels=["model", "persona"],
    )  # fmt: skip
    for model, persona, count in figures.unpriced_turns:
        unpriced.add_metric([model, persona], count)
    yield unpriced


async def scraper(request: Request, state: Annotated[ApiState, Depends(api_state)]) -> None:
    """/metrics says how busy and how failing the broker is, and per platform: it wants a
    bearer token like /v1 unless NEXUS_METRICS_PUBLIC opens it."""
    if state.nexus.settings.metrics_public:
        return
    tokens = state.tokens
    if not (tokens.digests or tokens.admin_digests or tokens.open_on_loopback):
        raise ApiError(
            401,
            "unauthorized",
            "NEXUS_API_TOKENS is not set: /metrics is closed (NEXUS_METRICS_PUBLIC=true opens it)",
        )
    client = request.client.host if request.client else None
    tokens.verify(request.headers.get("authorization"), client)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"},
        401: {"description": "No valid bearer token (NEXUS_METRICS_PUBLIC=true opens it)"},
    },
    dependencies=[Depends(scraper)],
)
def metrics(database: DatabaseDep) -> Response:
    """Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(database))
    # This process's own durations: HTTP requests, and tasks when a worker runs inside it
    # (`nexus dev`); a separate worker serves its own (NEXUS_WORKER_METRICS_PORT).
    registry.register(REGISTRY)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
