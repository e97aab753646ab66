"""The Gmail channel's work in a worker: a push's sync, and the timer's sync and watch
renewal. Failures are logged and left to the next push or tick (a minute at most): the
watermark moves only after the messages are stored, so nothing is skipped meanwhile."""

from __future__ import annotations

import structlog

from nexus.adapters.gmail_api import GmailApi
from nexus.bootstrap import Nexus
from nexus.ingest.gmail import GmailError, sync_mailbox
from nexus.timer.gmail_watch import renew_watch

log = structlog.get_logger(__name__)


def sync_gmail(runtime: Nexus, mailbox: str) -> int:
    """Store what the mailbox got since its watermark; how many messages were stored."""
    gmail = runtime.gmail
    if gmail is None or gmail.address != mailbox.strip().lower():
        log.warning("gmail_sync_skipped", reason="not the configured mailbox, or Gmail is off")
        return 0
    try:
        synced = sync_mailbox(
            runtime.database,
            gmail,
            runtime.doorbell,
            resync_limit=runtime.settings.gmail_resync_limit,
        )
    except GmailError as error:
        log.warning("gmail_sync_failed", error=str(error), kind=type(error).__name__)
        return 0
    if synced.stored or synced.resynced or synced.started:
        log.info(
            "gmail_synced",
            stored=len(synced.stored),
            history_id=synced.history_id,
            resynced=synced.resynced,
            started=synced.started,
        )
    return len(synced.stored)


def gmail_on_tick(runtime: Nexus) -> None:
    """Every minute: renew the watch when due, then sync (a push lost is a minute late)."""
    gmail, topic = runtime.gmail, runtime.settings.gmail_topic
    if gmail is None:
        return
    try:
        _renew_and_sync(runtime, gmail, topic)
    except Exception:  # a database outage: the tick's own work is done; next minute again
        log.warning("gmail_tick_failed", exc_info=True)


def _renew_and_sync(runtime: Nexus, gmail: GmailApi, topic: str | None) -> None:
    if topic:
        try:
            watch = renew_watch(runtime.database, gmail, topic=topic, now_ms=runtime.clock())
        except GmailError as error:
            log.warning("gmail_watch_failed", error=str(error), kind=type(error).__name__)
        else:
            if watch is not None:
                log.info("gmail_watch_renewed", expires_at=watch.expires_at)
    sync_gmail(runtime, gmail.address)
