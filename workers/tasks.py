"""Thin tasks: an id in, a unit of work, the core, commit (DESIGN §1 rule 7)."""

from __future__ import annotations

from typing import Any

import structlog
from celery import shared_task
from celery.signals import worker_process_init, worker_ready

from nexus.ingest.relay import relay
from nexus.ingest.router import process_event

log = structlog.get_logger(__name__)


def _runtime() -> Any:
    from workers.main import runtime

    return runtime


@shared_task(name="nexus.event.process")
def process(event_id: str) -> str:
    runtime = _runtime()
    with runtime.database.unit_of_work() as uow:
        routed = process_event(uow, event_id, runtime.policies, runtime.doorbell)
        uow.commit()
    log.info(
        "event_routed",
        event_id=event_id,
        disposition=routed.disposition,
        session=routed.session_label,
    )
    return routed.disposition


@worker_process_init.connect
def _after_fork(**_: Any) -> None:
    _runtime().after_fork()


@worker_ready.connect
def _relay_on_start(**_: Any) -> None:
    # Whatever was rung while no worker listened, or lost with a flushed Redis, is owed.
    runtime = _runtime()
    with runtime.database.unit_of_work() as uow:
        counts = relay(uow, runtime.doorbell, grace_ms=0)
    log.info("relay_on_start", events=counts.events, sessions=counts.sessions)
    runtime.after_fork()
