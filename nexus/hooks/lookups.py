"""What a hook's context reaches in the ledger and the model, done by the worker for it:
event search, recent events, read-only SQL, the model, and what the hook knows of itself."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nexus.db import Database
from nexus.db.read_only import ReadOnlyQueryError, run_read_only
from nexus.engine.model import ModelDone, ModelPort, ModelRequest
from nexus.hooks.spec import HookContext, HookInfo, HookSqlError, LastRun
from nexus.ledger.records import EventRecord, HookRecord

# A hook's query is cut after this long (it holds a worker's thread and a connection
# meanwhile), and may answer at most this many rows.
SQL_TIMEOUT_MS = 1000
SQL_MAX_ROWS = 500
_SCALARS = (str, int, float, bool)


@dataclass
class HookLookups:
    database: Database
    llm_port: Callable[[], ModelPort] | None = None
    llm_model: str = "scripted"
    sql_timeout_ms: int = SQL_TIMEOUT_MS
    sql_max_rows: int = SQL_MAX_ROWS

    def context(
        self,
        event: EventRecord,
        *,
        name: str,
        row: HookRecord | None,
        now_ms: int,
        minute_ms: int | None,
    ) -> HookContext:
        """The context of one call of hook `name`, whose registry row (None: not
        registered) was read as the call began: its state is a copy to the bottom, so
        what the call changes is found by comparing with the row."""
        return HookContext(
            event=event,
            now_ms=now_ms,
            minute_ms=minute_ms,
            state=copy.deepcopy(row.state) if row is not None else {},
            search_events=self.search,
            recent_events=self.recent,
            llm=self.llm,
            sql=self.sql,
            about_hook=lambda: self.about(name, row),
        )

    def search(self, query: str, limit: int = 10) -> list[EventRecord]:
        with self.database.reading() as uow:
            return uow.ledger.events.search(query, limit=limit)

    def recent(self, limit: int = 20) -> list[EventRecord]:
        with self.database.reading() as uow:
            return uow.ledger.events.recent(limit=limit)

    def sql(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        for key, value in (params or {}).items():
            if not isinstance(key, str) or not (value is None or isinstance(value, _SCALARS)):
                raise HookSqlError(
                    f"SQL for hooks: parameter {key!r} is a {type(value).__name__}; parameters "
                    "are named by strings and are strings, numbers, booleans or None"
                )
        try:
            return run_read_only(
                self.database,
                query,
                params,
                timeout_ms=self.sql_timeout_ms,
                max_rows=self.sql_max_rows,
            )
        except ReadOnlyQueryError as error:
            raise HookSqlError(str(error)) from None

    def about(self, name: str, row: HookRecord | None) -> HookInfo:
        """The hook as its row was when the call began, and its latest invocation."""
        if row is None:
            return HookInfo(name=name)
        with self.database.reading() as uow:
            last = uow.ledger.hooks.last_invocation(name)
        return HookInfo(
            name=name,
            registered=True,
            enabled=row.enabled,
            saved_state=copy.deepcopy(row.state),
            breaker_state=row.breaker_state,
            consecutive_errors=row.consecutive_errors,
            last_fired_at=row.last_fired_at,
            last_run=None
            if last is None
            else LastRun(
                event_id=last["event_id"],
                started_at=last["started_at"],
                latency_ms=last["latency_ms"],
                fired=last["fired"],
                result=last["result"],
                error=last["error"],
            ),
        )

    def llm(self, prompt: str) -> str:
        if self.llm_port is None:
            raise RuntimeError("no model is configured for hooks")
        request = ModelRequest(
            model=self.llm_model,
            system="Answer briefly.",
            messages=({"role": "user", "content": [{"type": "text", "text": prompt}]},),
            max_tokens=512,
        )
        stream = self.llm_port().stream(request)
        try:
            for item in stream:
                if isinstance(item, ModelDone):
                    return item.text
        finally:
            stream.close()
        return ""
