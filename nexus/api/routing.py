"""POST /v1/route: the routing primitive over HTTP; it resolves a target and enqueues nothing."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from nexus.api.deps import AUTHENTICATED, DatabaseDep
from nexus.api.errors import ApiError
from nexus.ledger.records import SessionLabel, SessionRecord, StorableText
from nexus.ledger.repository import Ledger, NotForkable, NotFound
from nexus.routing.route import RouteTarget, TargetKind, persona_session_label, route

router = APIRouter(prefix="/v1", tags=["routing"], dependencies=AUTHENTICATED)

_KINDS: tuple[TargetKind, ...] = ("thread", "session", "persona")


class RouteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thread: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    session: SessionLabel | None = None
    persona: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    smart: bool = False
    content: StorableText = Field(min_length=1, max_length=100_000)

    @model_validator(mode="after")
    def _exactly_one_target(self) -> RouteRequest:
        given = [kind for kind in _KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            got = f" (got {', '.join(given)})" if given else ""
            raise ValueError(f"give exactly one of thread, session or persona{got}")
        return self

    def target(self) -> RouteTarget:
        for kind in _KINDS:
            value = getattr(self, kind)
            if value is not None:
                return RouteTarget(kind, value, smart=self.smart)
        raise AssertionError("validated: one target is set")  # pragma: no cover


class Resolved(BaseModel):
    """Where a turn for the target would go, and how it was found."""

    session: str
    session_id: str
    persona_id: str
    thread_id: str | None
    how: str  # head | fork | label | alias | persona | created | smart
    score: float | None
    created: bool
    smart_changed: bool


def _planned(ledger: Ledger, target: RouteTarget) -> SessionRecord | None:
    """Where the target alone leads, read without creating anything (None: nowhere yet)."""
    if target.kind == "thread":
        return ledger.sessions.headed_by(target.value)
    if target.kind == "session":
        return ledger.sessions.resolve(target.value)
    return ledger.sessions.resolve(persona_session_label(target.value))


@router.post("/route")
def resolve_route(body: RouteRequest, database: DatabaseDep) -> Resolved:
    """The session a turn for this target would extend.

    Resolving can create that session (a fork at a turn that heads no session, a persona's
    main session), so the label answered always exists; nothing is queued for it.
    """
    target = body.target()
    with database.unit_of_work() as uow:
        try:
            routed = route(uow.ledger, target, text=body.content)
        except NotFound as error:
            raise ApiError(404, "not_found", str(error)) from error
        except NotForkable as error:
            if uow.ledger.threads.get_turn(target.value) is None:
                raise ApiError(404, "not_found", f"no turn {target.value!r}") from error
            raise ApiError(409, "not_forkable", str(error)) from error
        planned = _planned(uow.ledger, target) if routed.how == "smart" else routed.session
        uow.commit()
    session = routed.session
    return Resolved(
        session=session.label,
        session_id=session.id,
        persona_id=session.persona_id,
        thread_id=session.thread_id,
        how=routed.how,
        score=routed.score,
        created=routed.how in ("fork", "created"),
        smart_changed=planned is None or planned.id != session.id,
    )
