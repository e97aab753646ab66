"""The broker adapter: the Celery app (every setting that matters, with its reason) and the
doorbell over it. The only module below the entry points that imports Celery."""

from __future__ import annotations

from typing import Any

from celery import Celery

from nexus.settings import Settings
from nexus.telemetry import REQUEST_ID, current_request_id

QUEUES = ("events", "sessions", "delivery", "hooks", "timer")


def visibility_timeout_s(settings: Settings) -> int:
    return settings.visibility_timeout_seconds or settings.turn_time_limit_seconds * 2 + 60


def broker_options(settings: Settings) -> dict[str, Any]:
    options: dict[str, Any] = {
        # Redis redelivers an unacked task after this long. It must exceed the longest turn,
        # or a slow turn is handed to a second worker while the first still runs it.
        "visibility_timeout": visibility_timeout_s(settings),
    }
    if settings.broker_url.startswith("memory://"):
        # The in-process transport polls once a second by default: 200 tasks took 24 s.
        options["polling_interval"] = 0.005
    if settings.broker_prefix:
        options["global_keyprefix"] = settings.broker_prefix
    return options


def create_celery(settings: Settings) -> Celery:
    # The tasks are named, not imported: they live in the `workers` entry point, which a
    # worker loads when it starts (`include`); a process that only publishes never needs them.
    app = Celery("nexus", broker=settings.broker_url, include=["workers.tasks"])
    app.conf.update(
        # Ack after the task ran, not when it was received: a worker that dies mid-task
        # leaves the message to be redelivered (our attempt counters bound the retries).
        task_acks_late=True,
        # ...and that includes a worker process killed outright (OOM, kill -9).
        task_reject_on_worker_lost=True,
        # One task in hand per process: nothing sits stranded in a dead worker's buffer,
        # and a long turn does not hold short tasks hostage.
        worker_prefetch_multiplier=1,
        broker_transport_options=broker_options(settings),
        # A lost broker connection cancels running tasks so they are redelivered cleanly
        # rather than finishing unacknowledged.
        worker_cancel_long_running_tasks_on_connection_loss=True,
        broker_connection_retry_on_startup=True,
        # Results live in the ledger; a result backend would be a second source of truth.
        task_ignore_result=True,
        # One queue per kind of work, so each can be scaled and watched on its own.
        task_default_queue="events",
        task_routes={
            f"nexus.{kind}.*": {"queue": queue}
            for kind, queue in (
                ("event", "events"),
                ("session", "sessions"),
                ("delivery", "delivery"),
                ("hooks", "hooks"),
                ("timer", "timer"),
                ("gmail", "events"),
            )
        },
        # Task events for Flower (the same as `worker -E`).
        worker_send_task_events=True,
        task_send_sent_event=True,
    )
    return app


def runs_waiting(app: Celery, queue: str = "sessions") -> int | None:
    """How many tasks wait in `queue` for a worker (published, not yet taken), or None when
    the broker cannot say. A worker's watchdog asks it once a look: with a backlog, a
    session's ring is waiting its turn, not lost.

    Declared, not asked passively: kombu's Redis transport (5.7) checks a passive
    declaration's queue without the broker key prefix, so under a prefix it answered "no
    such queue" (0) whatever waited. Declaring a queue the workers consume changes nothing."""
    try:
        with app.connection_for_read() as connection:
            declared = connection.default_channel.queue_declare(queue=queue)
    except Exception:
        return None
    return int(declared.message_count)


class CeleryDoorbell:
    """The doorbell over Celery: publish a task naming the work; the ledger holds the work.

    A task rung while a request id is bound (an API request, or a task that request led
    to) carries it as the `request_id` header, and the worker binds it into that task's
    logs (workers/tasks.py): one id follows a request through every process it reaches."""

    def __init__(self, app: Celery) -> None:
        self._app = app

    def _send(self, name: str, args: list[str], countdown: float | None = None) -> None:
        request_id = current_request_id()
        headers = {REQUEST_ID: request_id} if request_id else None
        self._app.send_task(name, args=args, countdown=countdown, headers=headers)

    def event_received(self, event_id: str) -> None:
        self._send("nexus.event.process", [event_id])

    def hooks_due(self, event_id: str) -> None:
        self._send("nexus.event.hooks", [event_id])

    def session_has_work(self, session_id: str) -> None:
        self._send("nexus.session.run", [session_id])

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        self._send("nexus.session.run", [session_id], countdown=delay_ms / 1000)

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        countdown = delay_ms / 1000 if delay_ms > 0 else None
        self._send("nexus.delivery.send", [delivery_id], countdown=countdown)

    def mailbox_changed(self, mailbox: str) -> None:
        self._send("nexus.gmail.sync", [mailbox])


def ping_workers(app: Celery, timeout_s: float) -> list[str]:
    """The workers on the app's broker that answer a ping within `timeout_s`, by name."""
    answers = app.control.ping(timeout=timeout_s) or []
    return sorted(name for answer in answers for name in answer)
