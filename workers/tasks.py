"""Thin tasks: an id in, a unit of work, the core, commit (invariant 7)."""

from __future__ import annotations

import threading
import time
from typing import Any

import structlog
from celery import current_app, shared_task
from celery.signals import worker_process_init, worker_ready
from structlog.contextvars import bound_contextvars

from nexus.adapters.celery_broker import runs_waiting
from nexus.bootstrap import Nexus, bootstrap_worker
from nexus.ids import now_ms
from nexus.ingest.files import scan_folder
from nexus.ingest.relay import relay, relay_hooks
from nexus.operations.service import fold_metrics
from nexus.sessions.watchdog import ring_orphaned
from nexus.settings import get_settings
from nexus.timer.tick import tick
from workers import telemetry  # noqa: F401 - connects the task signals (ids, timings)
from workers.gmail import gmail_on_tick, sync_gmail

log = structlog.get_logger(__name__)
_building = threading.Lock()


def _runtime() -> Nexus:
    """The object graph of this process, which the app it runs carries (`app.nexus`)."""
    app = current_app._get_current_object()
    graph: Nexus | None = getattr(app, "nexus", None)
    if graph is None:
        # A pool that never forks (threads, solo) gets no worker_process_init: build on
        # first use, once, however many threads ask at the same moment.
        with _building:
            graph = getattr(app, "nexus", None) or bootstrap_worker(get_settings(), celery=app)
    return graph


@shared_task(name="nexus.event.process")
def process(event_id: str) -> int:
    """The router: every event waiting (the one that rang among them), in batches."""
    with bound_contextvars(task="nexus.event.process", event_id=event_id):
        return _process(event_id)


def _process(event_id: str) -> int:
    return len(_runtime().router.drain(rang_for=event_id))


@shared_task(name="nexus.event.hooks")
def run_hooks(event_id: str) -> int:
    """The hooks for one event: rung after a commit that stored an event no router runs
    them for (a timer minute, an API message), and by the relay for an obligation still
    due. Idempotent: each hook is evaluated on an event at most once."""
    with bound_contextvars(task="nexus.event.hooks", event_id=event_id):
        return len(_runtime().run_hooks(event_id))


@shared_task(name="nexus.timer.tick")
def timer_tick() -> int:
    """Every 60 s from beat: due timer minutes, then the relay (stale doorbells, claims)."""
    runtime = _runtime()
    with runtime.database.unit_of_work() as uow:
        ticked = tick(uow, runtime.doorbell, now_ms=now_ms())
        uow.commit()
    with runtime.database.unit_of_work() as uow:
        counts = relay(uow, runtime.doorbell, flags=runtime.coordination)
    recovered = runtime.delivery_service.recover()
    half_open = runtime.hook_runner.cool_breakers()
    with runtime.database.unit_of_work() as uow:
        folded = fold_metrics(uow)
        uow.commit()
    gmail_on_tick(runtime)
    if runtime.files_folder is not None:
        # The watched folder is scanned in a task of its own: a slow disk delays no tick.
        runtime.celery.send_task("nexus.files.scan")
    log.info(
        "timer_tick",
        metric_deltas_folded=folded,
        breakers_half_open=len(half_open),
        minutes=len(ticked.minutes),
        skipped=ticked.skipped,
        relayed_events=counts.events,
        relayed_sessions=counts.sessions,
        relayed_hooks=counts.hooks,
        deliveries_rung=recovered.rung,
        deliveries_lapsed=recovered.resent + recovered.failed,
    )
    return len(ticked.minutes)


@shared_task(name="nexus.files.scan")
def files_scan() -> int:
    """The watched folder's files that settled, as events (rung by every timer tick)."""
    runtime = _runtime()
    folder = runtime.files_folder
    if folder is None:
        return 0
    settings = runtime.settings
    scanned = scan_folder(
        runtime.database,
        folder,
        runtime.doorbell,
        now_ms=now_ms(),
        settle_ms=int(settings.files_settle_seconds * 1000),
        max_bytes=settings.attachment_max_bytes,
    )
    log.info(
        "files_scanned",
        listed=scanned.listed,
        sighted=scanned.sighted,
        recorded=scanned.recorded,
    )
    return scanned.recorded


@shared_task(name="nexus.session.run")
def run_session(session_id: str) -> str:
    with bound_contextvars(task="nexus.session.run", session_id=session_id):
        report = _runtime().session_runner.run(session_id)
    log.info(
        "session_run",
        session_id=session_id,
        status=report.status,
        turns=report.turns,
        failed=report.failed,
        dead_lettered=report.dead_lettered,
    )
    return str(report.status)


@shared_task(name="nexus.delivery.send")
def send_delivery(delivery_id: str) -> str:
    with bound_contextvars(task="nexus.delivery.send", delivery_id=delivery_id):
        outcome: str = _runtime().delivery_service.send(delivery_id)
    return outcome


@shared_task(name="nexus.gmail.sync")
def gmail_sync(mailbox: str) -> int:
    """A Gmail push was recorded: store the mailbox's new messages."""
    with bound_contextvars(task="nexus.gmail.sync"):
        return sync_gmail(_runtime(), mailbox)


@worker_process_init.connect
def _after_fork(**_: Any) -> None:
    """A forked child builds its own graph: it must not share its parent's sockets."""
    app = current_app._get_current_object()
    inherited: Nexus | None = getattr(app, "nexus", None)
    if inherited is not None:
        inherited.close()
    bootstrap_worker(get_settings(), celery=app)


@worker_ready.connect
def _relay_on_start(**_: Any) -> None:
    # Whatever was rung while no worker listened, or lost with a flushed Redis, is owed.
    runtime = _runtime()
    with runtime.database.unit_of_work() as uow:
        counts = relay(uow, runtime.doorbell, grace_ms=0, hooks_grace_ms=0)
    recovered = runtime.delivery_service.recover()
    log.info(
        "relay_on_start",
        events=counts.events,
        sessions=counts.sessions,
        hooks=counts.hooks,
        deliveries_rung=recovered.rung,
        deliveries_resent=recovered.resent,
        deliveries_failed=recovered.failed,
    )
    # Children forked from here on must not inherit this process's pooled connections.
    runtime.close()
    every = runtime.settings.watchdog_seconds
    if every > 0:
        threading.Thread(
            target=_watch_for_dead_runs, args=(every,), name="nexus-watchdog", daemon=True
        ).start()


def _watch_for_dead_runs(every_s: float) -> None:
    """Every few seconds, ring the sessions of runs that died or whose ring was lost
    (sessions/watchdog.py), and the hooks of events whose evaluation a dead run (or a lost
    ring) left due."""
    while True:
        time.sleep(every_s)
        try:
            graph = _runtime()
            # Queued work overdue by a whole period with no run is stranded (its ring was
            # lost), unless session runs wait in the broker (then it waits its turn);
            # claimed work with no lease, at once.
            waiting = runs_waiting(current_app._get_current_object())
            orphans = ring_orphaned(
                graph.database,
                graph.coordination,
                graph.doorbell,
                grace_ms=int(every_s * 1000),
                backlog=bool(waiting),
            )
            with graph.database.unit_of_work() as uow:
                hooks = relay_hooks(uow, graph.doorbell, flags=graph.coordination)
        except Exception:  # a database or Redis outage: look again next time
            log.warning("watchdog_failed", exc_info=True)
            continue
        if orphans.dead_runs:
            log.warning("dead_runs_rung", sessions=orphans.dead_runs)
        if orphans.overdue:
            # Lost rings, or rings a busy worker prefetched (the broker's queue does not
            # count them): under load the latter is common and harmless, so not a warning.
            log.info("overdue_sessions_rung", sessions=orphans.overdue)
        if hooks:
            log.warning("hooks_rung_again", events=hooks)
