"""Turns over HTTP: one turn, its whole ancestry, and forking a new session from it."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from nexus.api.deps import AUTHENTICATED, DatabaseDep
from nexus.api.errors import ApiError, error_responses
from nexus.db.unit_of_work import UnitOfWork
from nexus.ledger.records import NewSessionLabel, SessionRecord, TurnView
from nexus.ledger.repository import LabelTaken, NotForkable
from nexus.ledger.strings import TurnId

router = APIRouter(
    prefix="/v1/turns",
    tags=["turns"],
    dependencies=AUTHENTICATED,
    responses=error_responses(404, 409),
)


class ForkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: NewSessionLabel | None = None  # None: the ledger names it fork-<id>


class TurnThread(BaseModel):
    turn_id: str
    turns: list[TurnView]


def _turn(uow: UnitOfWork, turn_id: str) -> TurnView:
    view = uow.ledger.threads.get_turn(turn_id)
    if view is None:
        raise ApiError(404, "not_found", f"no turn {turn_id!r}")
    return view


@router.get("/{turn_id}")
def get_turn(turn_id: TurnId, database: DatabaseDep) -> TurnView:
    """One turn with its messages and tool calls (the shape `nexus turn --json` prints)."""
    with database.unit_of_work() as uow:
        return _turn(uow, turn_id)


@router.get("/{turn_id}/thread")
def get_thread(turn_id: TurnId, database: DatabaseDep) -> TurnThread:
    """Every turn from the root to this one, oldest first, compactions included."""
    with database.unit_of_work() as uow:
        view = _turn(uow, turn_id)
        if uow.ledger.threads.get_thread(turn_id) is not None:
            chain = uow.ledger.threads.read_ancestry(turn_id)
        else:
            # A failed or superseded turn is off every chain; its ancestry is its parent's.
            parent = view.turn.parent_turn_id
            chain = [*(uow.ledger.threads.read_ancestry(parent) if parent else []), view]
    return TurnThread(turn_id=turn_id, turns=chain)


@router.post("/{turn_id}/fork", status_code=201)
def fork(turn_id: TurnId, database: DatabaseDep, body: ForkRequest | None = None) -> SessionRecord:
    """A new session whose head is this turn; the persona is the thread's."""
    label = body.label if body else None
    with database.unit_of_work() as uow:
        _turn(uow, turn_id)
        try:
            session = uow.ledger.sessions.fork(turn_id, label=label)
        except NotForkable as error:
            raise ApiError(409, "not_forkable", str(error)) from error
        except LabelTaken as error:
            raise ApiError(409, "conflict", str(error)) from error
        uow.commit()
    return session
