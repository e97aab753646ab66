"""Finding a session (or a persona) by the name a caller gives, the one rule every door
shares: NotFound, saying what was asked for, when there is none."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.db import UnitOfWork
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository import NotFound


@dataclass(frozen=True)
class SessionEntry:
    """A session with its persona's name and the aliases that lead to it."""

    session: SessionRecord
    persona: str | None
    aliases: list[str]


def get(uow: UnitOfWork, label: str) -> SessionRecord:
    """The live session labelled `label` (aliases followed)."""
    session = uow.ledger.sessions.resolve(label)
    if session is None:
        raise NotFound(f"no session labelled {label!r}")
    return session


def get_any(uow: UnitOfWork, label: str) -> SessionRecord:
    """As `get`, and else the newest deleted session that had the label: for reading it,
    and for answering what became of it."""
    session = uow.ledger.sessions.resolve(label) or uow.ledger.sessions.get_by_label(label)
    if session is None:
        raise NotFound(f"no session labelled {label!r}")
    return session


def persona_id(uow: UnitOfWork, name: str) -> str:
    """The id of the persona named `name`."""
    agent = uow.ledger.agents.get_by_name(name)
    if agent is None:
        raise NotFound(f"no persona named {name!r}")
    return agent.id


def entry(uow: UnitOfWork, session: SessionRecord) -> SessionEntry:
    persona = uow.ledger.agents.get(session.persona_id)
    return SessionEntry(
        session=session,
        persona=persona.name if persona else None,
        aliases=[alias for alias, _ in uow.ledger.sessions.aliases_of(session.label)],
    )
