"""Security events (a tool refusing to send a credential, or to reach an address), counted
in the ledger so that the API's /metrics shows those seen by every worker process."""

from __future__ import annotations

import structlog

from nexus.db import Database
from nexus.ledger.repository.metrics import SECURITY_EVENTS

log = structlog.get_logger(__name__)


class SecurityEvents:
    """Counts each event as a delta row in its own transaction: the count survives a turn
    that fails or is fenced afterwards, and shows as `nexus_security_events_total`."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def count(self, kind: str) -> None:
        try:
            with self._database.unit_of_work() as uow:
                uow.ledger.metrics.count(SECURITY_EVENTS, kind[:64])
                uow.commit()
        except Exception as error:  # the refusal itself stands; only its count is lost
            log.error("security.count_failed", kind=kind, error=type(error).__name__)
