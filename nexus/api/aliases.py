"""/v1/aliases: another key that leads to a session, by hand (merges write them too)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from pydantic import BaseModel, ConfigDict

from nexus.api.deps import DatabaseDep, v1_router
from nexus.api.errors import Answers, ApiError, answering
from nexus.api.pagination import Page, PageRequest, decode_cursor, page_body, page_request
from nexus.ledger.records import NewSessionLabel, SessionLabel
from nexus.ledger.repository import LedgerConflict, NotFound
from nexus.people import service as people
from nexus.people.service import AliasExists

router = v1_router("/v1/aliases", "aliases", 404, 409)


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


def _view(found: people.Alias) -> AliasView:
    return AliasView.model_validate(found, from_attributes=True)


# AliasExists before LedgerConflict, which it is a kind of: any other conflict is a circle.
_ADD_ANSWERS: Answers = {
    NotFound: (404, "not_found"),
    AliasExists: (409, "alias_exists"),
    LedgerConflict: (409, "alias_cycle"),
}


@router.get("")
def list_aliases(
    database: DatabaseDep, page: Annotated[PageRequest, Depends(page_request)]
) -> Page[AliasView]:
    """Every alias, in alias order."""
    after = decode_cursor(page.cursor, [str])
    with database.reading() as uow:
        found = people.alias_page(uow, after=str(after[0]) if after else None, limit=page.limit + 1)
    return page_body(found, page.limit, lambda a: (a.alias,), _view)


@router.post("", status_code=201)
def create_alias(body: CreateAlias, database: DatabaseDep) -> AliasView:
    """What is addressed to `alias` goes to `session` from now on: the router, the API and
    agents all resolve through it. An alias wins over a session with its label (that
    session keeps its history and stops receiving). A circle is refused (409)."""
    with answering(_ADD_ANSWERS), database.unit_of_work() as uow:
        added = people.add_alias(uow, body.alias, body.session)
        uow.commit()
    return _view(added)


@router.get("/{alias:path}")
def show_alias(alias: SessionLabel, database: DatabaseDep) -> AliasView:
    """One alias and where it leads."""
    try:
        with database.reading() as uow:
            return _view(people.alias(uow, alias))
    except NotFound as error:
        raise ApiError(404, "not_found", str(error)) from error


@router.delete("/{alias:path}")
def remove_alias(alias: SessionLabel, database: DatabaseDep) -> AliasView:
    """Remove an alias (a merge's too): what is addressed to it goes to the session with its
    own label again, or starts one. Answers the alias as it was."""
    try:
        with database.unit_of_work() as uow:
            removed = people.remove_alias(uow, alias)
            uow.commit()
    except NotFound as error:
        raise ApiError(404, "not_found", str(error)) from error
    return _view(removed)
