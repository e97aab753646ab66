"""The doorbell over Celery: publish a task naming the work; the ledger holds the work."""

from __future__ import annotations

from celery import Celery

from nexus.ingest.doorbell import DeferredDoorbell, Doorbell
from nexus.settings import Settings


class CeleryDoorbell:
    def __init__(self, app: Celery) -> None:
        self._app = app

    def event_received(self, event_id: str) -> None:
        self._app.send_task("nexus.event.process", args=[event_id])

    def session_has_work(self, session_id: str) -> None:
        self._app.send_task("nexus.session.run", args=[session_id])

    def session_has_work_after(self, session_id: str, delay_ms: int) -> None:
        self._app.send_task("nexus.session.run", args=[session_id], countdown=delay_ms / 1000)

    def delivery_ready(self, delivery_id: str, delay_ms: int = 0) -> None:
        countdown = delay_ms / 1000 if delay_ms > 0 else None
        self._app.send_task("nexus.delivery.send", args=[delivery_id], countdown=countdown)


def doorbell_for(settings: Settings) -> Doorbell:
    """Celery when a shared broker is configured; otherwise the relay will ring."""
    if settings.broker_url.startswith("memory://"):
        return DeferredDoorbell()
    from workers.app import create_celery

    return CeleryDoorbell(create_celery(settings))
