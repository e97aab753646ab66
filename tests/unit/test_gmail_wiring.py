"""A Gmail push rings the sync task by name, on the events queue, and the worker has it."""

from __future__ import annotations

from typing import Any

from nexus.adapters.celery_broker import CeleryDoorbell, create_celery
from nexus.doorbell import CoalescingDoorbell, DeferredDoorbell, RecordingDoorbell
from nexus.queueing.coordination import InProcessCoordination
from nexus.settings import Settings
from workers import tasks


class Published:
    def __init__(self) -> None:
        self.tasks: list[tuple[str, list[Any]]] = []

    def send_task(self, name: str, args: list[Any], **_: Any) -> None:
        self.tasks.append((name, args))


def test_a_mailbox_ring_publishes_the_gmail_sync_task_the_worker_runs() -> None:
    app = Published()
    bell = CoalescingDoorbell(CeleryDoorbell(app), InProcessCoordination())
    bell.mailbox_changed("bot@example.com")
    bell.mailbox_changed("bot@example.com")  # never coalesced: each push may bring mail
    assert app.tasks == [("nexus.gmail.sync", ["bot@example.com"])] * 2
    assert tasks.gmail_sync.name == "nexus.gmail.sync"
    routes = create_celery(Settings()).conf.task_routes
    assert routes["nexus.gmail.*"] == {"queue": "events"}


def test_the_in_process_doorbells_take_the_ring() -> None:
    recording = RecordingDoorbell()
    recording.mailbox_changed("bot@example.com")
    assert recording.mailboxes == ["bot@example.com"]
    DeferredDoorbell().mailbox_changed("bot@example.com")  # the timer's sync finds the mail
