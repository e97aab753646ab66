"""Sessions as resources: list, create, and one session by label (aliases followed)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from nexus.api.auth import require_token
from nexus.api.errors import ApiError
from nexus.api.pagination import PageRequest, decode_cursor, page_body, page_request
from nexus.api.state import AppState
from nexus.db import UnitOfWork
from nexus.ingest.direct import DEFAULT_PERSONA
from nexus.ledger.enums import QueueMode, SessionOrigin
from nexus.ledger.records import NewSession, SessionLabel, SessionRecord, StorableText
from nexus.ledger.repository import LabelTaken

_auth = [Depends(require_token)]
router = APIRouter(prefix="/v1/sessions", tags=["sessions"], dependencies=_auth)
# Registered after every /v1/sessions/{label}/… route: its path would match those too.
by_label = APIRouter(prefix="/v1/sessions", tags=["sessions"], dependencies=_auth)


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: SessionLabel
    persona: StorableText = Field(default=DEFAULT_PERSONA, min_length=1, max_length=200)
    queue_mode: QueueMode | None = None


def session_view(uow: UnitOfWork, session: SessionRecord) -> dict[str, Any]:
    persona = uow.ledger.agents.get(session.persona_id)
    return {
        **session.model_dump(mode="json"),
        "persona": persona.name if persona else None,
        "aliases": [alias for alias, _ in uow.ledger.sessions.aliases_of(session.label)],
    }


def resolve(uow: UnitOfWork, label: str) -> SessionRecord:
    session = uow.ledger.sessions.resolve(label)
    if session is None:
        raise ApiError(404, "not_found", f"no session labelled {label!r}")
    return session


@router.get("")
def list_sessions(
    request: Request,
    page: Annotated[PageRequest, Depends(page_request)],
    persona: str | None = None,
) -> dict[str, Any]:
    """Sessions in label order, optionally of one persona (by name)."""
    state: AppState = request.app.state.nexus
    after = decode_cursor(page.cursor, [str])
    with state.database.unit_of_work() as uow:
        persona_id = None
        if persona is not None:
            agent = uow.ledger.agents.get_by_name(persona)
            if agent is None:
                raise ApiError(404, "not_found", f"no persona named {persona!r}")
            persona_id = agent.id
        rows = uow.ledger.sessions.page(
            after_label=str(after[0]) if after else None,
            limit=page.limit + 1,
            persona_id=persona_id,
        )
        return page_body(rows, page.limit, lambda s: (s.label,), lambda s: session_view(uow, s))


@router.post("", status_code=201)
def create_session(body: CreateSession, request: Request) -> dict[str, Any]:
    """A new, empty session for a persona (created when it does not exist yet)."""
    state: AppState = request.app.state.nexus
    with state.database.unit_of_work() as uow:
        if uow.ledger.sessions.resolve(body.label) is not None:
            raise ApiError(409, "conflict", f"session {body.label!r} exists")
        agent = uow.ledger.agents.ensure(body.persona)
        try:
            session = uow.ledger.sessions.create(
                NewSession(
                    label=body.label,
                    persona_id=agent.id,
                    origin=SessionOrigin.USER,
                    queue_mode=body.queue_mode,
                )
            )
        except LabelTaken as error:
            raise ApiError(409, "conflict", str(error)) from error
        view = session_view(uow, session)
        uow.commit()
    return view


@by_label.get("/{label:path}")
def get_session(label: str, request: Request) -> dict[str, Any]:
    """One session; a label that is an alias (after an entity merge) gives its target."""
    state: AppState = request.app.state.nexus
    with state.database.unit_of_work() as uow:
        return session_view(uow, resolve(uow, label))
