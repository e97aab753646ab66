"""The files channel's bytes, read from the ledger for the model at turn time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexus.db import Database
from nexus.engine.attachments import AttachmentUnavailable, Fetched


class LedgerFiles:
    """Fetches a file event's attachment by its `file_id` (`sha256:<hex>`) from the ledger's
    `files` table, where the folder scan or the upload kept it."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def fetch(self, attachment: Mapping[str, Any]) -> Fetched:
        file_id = attachment.get("file_id")
        if not isinstance(file_id, str) or not file_id:
            raise AttachmentUnavailable("the file has no id")
        with self.database.unit_of_work() as uow:
            found = uow.ledger.files.get(file_id)
        if found is None:
            raise AttachmentUnavailable("the file's bytes are not in the ledger")
        return Fetched(found.data, found.mime_type)
