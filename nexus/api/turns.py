"""Turns over HTTP: one turn, its whole ancestry, and forking a new session from it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from nexus.api.deps import DatabaseDep, v1_router
from nexus.ledger.records import NewSessionLabel, SessionRecord, TurnView
from nexus.ledger.strings import TurnId
from nexus.sessions import service as sessions

router = v1_router("/v1/turns", "turns", 404, 409)


class ForkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: NewSessionLabel | None = None  # None: the ledger names it fork-<id>


class TurnThread(BaseModel):
    turn_id: str
    turns: list[TurnView]


@router.get("/{turn_id}")
def get_turn(turn_id: TurnId, database: DatabaseDep) -> TurnView:
    """One turn with its messages and tool calls (the shape `nexus turn --json` prints)."""
    with database.unit_of_work() as uow:
        return sessions.get_turn(uow, turn_id)


@router.get("/{turn_id}/thread")
def get_thread(turn_id: TurnId, database: DatabaseDep) -> TurnThread:
    """Every turn from the root to this one, oldest first, compactions included."""
    with database.unit_of_work() as uow:
        chain = sessions.turn_thread(uow, turn_id)
    return TurnThread(turn_id=turn_id, turns=chain)


@router.post("/{turn_id}/fork", status_code=201)
def fork(turn_id: TurnId, database: DatabaseDep, body: ForkRequest | None = None) -> SessionRecord:
    """A new session whose head is this turn; the persona is the thread's."""
    with database.unit_of_work() as uow:
        return sessions.fork(uow, turn_id, body.label if body else None)
