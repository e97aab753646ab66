"""Tokens and cost of the turns of a session, a persona or everything, since an instant: in
total, per UTC day and per model (failed attempts and compactions count: they were billed)."""

from __future__ import annotations

from nexus.db import UnitOfWork
from nexus.ledger.repository.usage import UsageReport, summarize
from nexus.sessions.entries import get, persona_id


def usage_report(
    uow: UnitOfWork,
    *,
    session: str | None = None,
    persona: str | None = None,
    since_ms: int | None = None,
) -> UsageReport:
    """The usage of the turns that match every filter given: a live session (aliases
    followed) and a persona by name, each NotFound when there is none."""
    session_id = get(uow, session).id if session is not None else None
    owner = persona_id(uow, persona) if persona is not None else None
    groups = uow.ledger.usage.groups(session_id=session_id, persona_id=owner, since_ms=since_ms)
    return summarize(groups)
