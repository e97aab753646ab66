"""Entities: merging two records of one person, and what it does to their sessions."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from nexus.api.deps import AUTHENTICATED, DatabaseDep, DoorbellDep
from nexus.api.errors import ApiError
from nexus.identity.merge import merge_entities
from nexus.ledger.repository import LedgerConflict, NotFound

router = APIRouter(prefix="/v1/entities", tags=["entities"], dependencies=AUTHENTICATED)


class MergeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    into: str = Field(min_length=1)
    merge: list[str] = Field(min_length=1)


class MergeResponse(BaseModel):
    root: str
    primary_session: str | None
    aliases_created: list[str]


@router.post("/merge")
def merge(body: MergeRequest, database: DatabaseDep, doorbell: DoorbellDep) -> MergeResponse:
    """These entities are one person: their DM sessions get aliases to one primary."""
    try:
        with database.unit_of_work() as uow:
            result = merge_entities(uow, into=body.into, merged=body.merge, doorbell=doorbell)
            uow.commit()
    except NotFound as error:
        raise ApiError(404, "not_found", str(error)) from error
    except LedgerConflict as error:
        raise ApiError(409, "conflict", str(error)) from error
    return MergeResponse(
        root=result.root,
        primary_session=result.primary_session,
        aliases_created=list(result.aliases_created),
    )
