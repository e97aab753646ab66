"""POST /v1/route: the routing primitive over HTTP. It finds where the content goes — a
thread, a session, a persona, or (smart) the session that discussed it — and queues the
content there, as POST /v1/sessions/{label}/messages does."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator

from nexus.api.deps import AUTHENTICATED, NexusDep
from nexus.api.errors import ApiError, error_responses
from nexus.api.model_settings import check_model
from nexus.api.schemas.model import ModelConfigBody, without_nulls
from nexus.api.schemas.sessions import MAX_MESSAGE_CHARS, CallerSource
from nexus.arrival.messages import API_ADAPTER, send_to
from nexus.bootstrap import Nexus
from nexus.ids import new_id
from nexus.ledger.enums import MessageSource, QueueMode
from nexus.ledger.records import SessionLabel, SessionRecord, StorableText
from nexus.ledger.repository import Ledger, NotForkable, NotFound
from nexus.ledger.strings import Key, PersonaName
from nexus.routing.route import Routed, RouteTarget, TargetKind, persona_session_label, route

router = APIRouter(
    prefix="/v1", tags=["routing"], dependencies=AUTHENTICATED, responses=error_responses(404, 409)
)

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


def _planned(ledger: Ledger, target: RouteTarget | None) -> SessionRecord | None:
    """Where the target alone leads, read without creating anything (None: nowhere yet)."""
    if target is None:
        return None
    if target.kind == "thread":
        return ledger.sessions.headed_by(target.value)
    if target.kind == "session":
        return ledger.sessions.resolve(target.value)
    return ledger.sessions.resolve(persona_session_label(target.value))


def _reason(target: RouteTarget | None, routed: Routed, session: SessionRecord) -> str:
    label = session.label
    if routed.how == "smart":
        terms = ", ".join(routed.matched_terms)
        return (
            f"{label} discussed it: {len(routed.matched_terms)} of the content's terms "
            f"matched ({terms}; score {routed.score}), most recently in turn "
            f"{routed.matched_turn_id}"
        )
    missed = (
        "nothing said so far matches the content well enough; " if target and target.smart else ""
    )
    given = target.value if target is not None else ""
    explained = {
        "head": f"turn {given} is the head of {label}",
        "fork": f"turn {given} is not a session's head: forked into {label}",
        "label": f"the session labelled {label}",
        "alias": f"{given} is an alias of {label}",
        "persona": f"the main session of persona {given}",
        "created": f"the main session of persona {given}, created",
    }
    return missed + explained.get(routed.how, label)


def _route(graph: Nexus, body: RouteRequest) -> RouteQueued:
    target = body.target()
    # The message's event id, known before a persona's main session is made from it.
    event_id = f"{API_ADAPTER}:{new_id()}"
    with graph.database.unit_of_work() as uow:
        try:
            routed = route(uow.ledger, target, text=body.content, source_event_id=event_id)
        except NotFound as error:
            raise ApiError(404, "not_found", str(error)) from error
        except NotForkable as error:
            assert target is not None  # only a thread target forks
            if uow.ledger.threads.get_turn(target.value) is None:
                raise ApiError(404, "not_found", f"no turn {target.value!r}") from error
            raise ApiError(409, "not_forkable", str(error)) from error
        planned = _planned(uow.ledger, target) if routed.how == "smart" else routed.session
        # Exactly the session routed to: a thread's session is that thread's, whatever
        # aliases a merge left on its label since.
        queued = send_to(
            uow,
            routed.session,
            body.content,
            graph.doorbell,
            mode=body.mode,
            source=body.source,
            arrivals=graph.coordination,
            queueing=graph.queue_policy,
            policies=graph.policies,
            model_overrides=without_nulls(body.model_overrides),
            event_id=event_id,
        )
        check_model(uow, graph.settings.default_model, queued.session, body.model_overrides)
        uow.commit()
    session = queued.session
    return RouteQueued(
        session=session.label,
        session_id=session.id,
        persona_id=session.persona_id,
        thread_id=session.thread_id,
        how=routed.how,
        created=routed.how in ("fork", "created"),
        smart_changed=planned is None or planned.id != session.id,
        score=routed.score,
        matched_terms=list(routed.matched_terms),
        matched_turn_id=routed.matched_turn_id,
        reason=_reason(target, routed, session),
        event_id=queued.event_id,
        queue_item_id=queued.queue_item_id,
        mode=queued.mode,
    )


@router.post("/route", status_code=202)
def route_content(body: RouteRequest, graph: NexusDep) -> RouteQueued:
    """Route the content and queue it there; 202 once it is queued (after commit).

    A thread target continues the session it heads, or forks a new session from it; a
    session label follows aliases; a persona goes to its main session (created on first
    use). `smart` (or no target at all) first searches what was said for the session
    whose recent messages share most of the content's terms, and says which matched.
    """
    return _route(graph, body)
