"""/v1/aliases: another key that leads to a session, by hand (merges write them too)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from nexus.api.deps import AUTHENTICATED, DatabaseDep
from nexus.api.errors import ApiError, error_responses
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.db import UnitOfWork
from nexus.ledger.records import NewSessionLabel, SessionLabel
from nexus.ledger.repository import LedgerConflict, NotFound
from nexus.ledger.repository.session_aliases import AliasRow

router = APIRouter(
    prefix="/v1/aliases",
    tags=["aliases"],
    dependencies=AUTHENTICATED,
    responses=error_responses(404, 409),
)
MANUAL = "manual"


class CreateAlias(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alias: NewSessionLabel  # a key chosen here: no `/`, as for a new session's label
    session: SessionLabel  # the session it leads to (an alias here: that alias's session)


class AliasView(BaseModel):
    alias: str
    session: str  # the label it points at
    resolves_to: str | None  # where it leads in the end (aliases followed), if a session
    reason: str | None  # "manual", or why a merge wrote it
    created_at: int


@router.get("")
def list_aliases(
    database: DatabaseDep, page: Annotated[PageRequest, Depends(page_request)]
) -> Page[AliasView]:
    """Every alias, in alias order."""
    after = decode_cursor(page.cursor, [str])
    with database.reading() as uow:
        rows = uow.ledger.sessions.alias_page(
            after=str(after[0]) if after else None, limit=page.limit + 1
        )
        return page_body(rows, page.limit, lambda row: (row[0],), lambda row: _view(uow, row))


def _view(uow: UnitOfWork, row: AliasRow) -> AliasView:
    alias, label, reason, created = row
    found = uow.ledger.sessions.resolve(alias)
    return AliasView(
        alias=alias,
        session=label,
        resolves_to=found.label if found is not None else None,
        reason=reason,
        created_at=created,
    )


@router.post("", status_code=201)
def create_alias(body: CreateAlias, database: DatabaseDep) -> AliasView:
    """What is addressed to `alias` goes to `session` from now on: the router, the API and
    agents all resolve through it. An alias wins over a session with its label (that
    session keeps its history and stops receiving). A circle is refused (409)."""
    if body.alias == body.session:
        raise ApiError(409, "alias_cycle", f"{body.alias!r} cannot be an alias of itself")
    try:
        with database.unit_of_work() as uow:
            sessions = uow.ledger.sessions
            # An alias names a session: one given by another alias is the session it leads to.
            target = sessions.final_label(body.session)
            if target == body.alias:
                raise ApiError(
                    409,
                    "alias_cycle",
                    f"{body.alias!r} → {body.session!r} would make a circle: "
                    f"{body.session!r} leads to {body.alias!r}",
                )
            if not sessions.add_alias(body.alias, target, reason=MANUAL):
                current = sessions.final_label(body.alias)
                raise ApiError(
                    409,
                    "alias_exists",
                    f"{body.alias!r} is an alias already (it leads to {current!r}); "
                    "remove it first",
                )
            row = sessions.alias(body.alias)
            assert row is not None  # written just now, in this transaction
            view = _view(uow, row)
            uow.commit()
    except NotFound as error:
        raise ApiError(404, "not_found", str(error)) from error
    except LedgerConflict as error:
        raise ApiError(409, "alias_cycle", str(error)) from error
    return view


@router.get("/{alias:path}")
def show_alias(alias: SessionLabel, database: DatabaseDep) -> AliasView:
    """One alias and where it leads."""
    with database.reading() as uow:
        row = uow.ledger.sessions.alias(alias)
        if row is None:
            raise ApiError(404, "not_found", f"no alias {alias!r}")
        return _view(uow, row)


@router.delete("/{alias:path}")
def remove_alias(alias: SessionLabel, database: DatabaseDep) -> AliasView:
    """Remove an alias (a merge's too): what is addressed to it goes to the session with its
    own label again, or starts one. Answers the alias as it was."""
    try:
        with database.unit_of_work() as uow:
            row = uow.ledger.sessions.alias(alias)
            if row is None:
                raise NotFound(f"no alias {alias!r}")
            view = _view(uow, row)
            uow.ledger.sessions.remove_alias(alias)
            uow.commit()
    except NotFound as error:
        raise ApiError(404, "not_found", str(error)) from error
    return view
