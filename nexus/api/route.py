"""POST /v1/route: the routing primitive over HTTP. It finds where the content goes — a
thread, a session, a persona, or (smart) the session that discussed it — and queues the
content there, as POST /v1/sessions/{label}/messages does."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nexus.api.deps import NexusDep, v1_router
from nexus.api.schemas.model import ModelConfigBody
from nexus.api.schemas.sessions import MAX_MESSAGE_CHARS, CallerSource
from nexus.arrival.route import RouteTarget, TargetKind
from nexus.arrival.routed import route_message
from nexus.ledger.enums import MessageSource, QueueMode
from nexus.ledger.records import SessionLabel, StorableText
from nexus.ledger.strings import Key, PersonaName

router = v1_router("/v1", "routing", 404, 409)

_KINDS: tuple[TargetKind, ...] = ("thread", "session", "persona")


class RouteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # A turn id (or a session's head); wider than the turns' ids, as it always took.
    thread: Annotated[str, Key(64, "a thread")] | None = None
    session: SessionLabel | None = None
    persona: PersonaName | None = None
    # Search what was said first; with no target given, routing is by content alone.
    smart: bool | None = None
    content: StorableText = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    mode: QueueMode | None = None
    source: CallerSource = MessageSource.HUMAN
    # `model_config` in JSON: the configuration of the turn that answers the content.
    model_overrides: ModelConfigBody | None = Field(default=None, alias="model_config")

    @model_validator(mode="after")
    def _one_target_at_most(self) -> RouteRequest:
        given = [kind for kind in _KINDS if getattr(self, kind) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of thread, session or persona (got {given})")
        if not given and self.smart is False:
            raise ValueError(
                "with no thread, session or persona the content is routed by what it says: "
                "leave smart out, or give a target"
            )
        return self

    def target(self) -> RouteTarget | None:
        for kind in _KINDS:
            value = getattr(self, kind)
            if value is not None:
                return RouteTarget(kind, value, smart=bool(self.smart))
        return None  # content alone: smart routing with nothing to fall back to


class RouteQueued(BaseModel):
    """Where the content went, why, and its queue item (its answer is a turn there)."""

    session: str
    session_id: str
    persona_id: str
    thread_id: str | None  # the turn the content's turn will follow (None: a new session)
    how: str  # head | fork | label | alias | persona | created | smart
    created: bool
    smart_changed: bool  # smart routing chose another session than the target alone
    score: float | None  # smart: the share of the content's terms that matched
    matched_terms: list[str]
    matched_turn_id: str | None  # smart: the newest turn whose messages matched
    reason: str
    event_id: str
    queue_item_id: str
    mode: QueueMode


@router.post("/route", status_code=202)
def route_content(body: RouteRequest, graph: NexusDep) -> RouteQueued:
    """Route the content and queue it there; 202 once it is queued (after commit).

    A thread target continues the session it heads, or forks a new session from it; a
    session label follows aliases; a persona goes to its main session (created on first
    use). `smart` (or no target at all) first searches what was said for the session
    whose recent messages share most of the content's terms, and says which matched.
    """
    target = body.target()
    with graph.database.unit_of_work() as uow:
        done = route_message(
            uow,
            graph,
            target,
            body.content,
            mode=body.mode,
            source=body.source,
            model_overrides=body.model_overrides,
        )
    routed, queued, session = done.routed, done.queued, done.queued.session
    return RouteQueued(
        session=session.label,
        session_id=session.id,
        persona_id=session.persona_id,
        thread_id=session.thread_id,
        how=routed.how,
        created=routed.how in ("fork", "created"),
        smart_changed=done.smart_changed,
        score=routed.score,
        matched_terms=list(routed.matched_terms),
        matched_turn_id=routed.matched_turn_id,
        reason=done.reason,
        event_id=queued.event_id,
        queue_item_id=queued.queue_item_id,
        mode=queued.mode,
    )
