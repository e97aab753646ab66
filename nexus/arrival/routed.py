"""Content routed, then queued where it went (`POST /v1/route`): `route` finds the session
— a thread, a session, a persona, or (smart) the session that discussed it — and the
content is sent there as a message to a session is, under the same model check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nexus.arrival.messages import Doors, QueuedMessage, new_event_id, send_checked
from nexus.arrival.route import Routed, RouteTarget, persona_session_label, route
from nexus.db import UnitOfWork
from nexus.ledger.enums import MessageSource, QueueMode
from nexus.ledger.records import SessionRecord
from nexus.ledger.repository import Ledger, NotForkable, NotFound


@dataclass(frozen=True)
class RoutedMessage:
    """Where the content went and how, its queue item, and whether smart routing chose
    another session than the target alone would have."""

    routed: Routed
    queued: QueuedMessage
    smart_changed: bool
    reason: str


def route_message(
    uow: UnitOfWork,
    doors: Doors,
    target: RouteTarget | None,
    content: str,
    *,
    mode: QueueMode | None,
    source: MessageSource,
    model_overrides: Mapping[str, Any] | None,
) -> RoutedMessage:
    """Route `content` and queue it there; commits. Raises NotFound (nowhere to go, or no
    such turn), NotForkable, SessionArchived, and ModelConfigError for a configuration the
    session cannot run (nothing is then written)."""
    # The message's event id, known before a persona's main session is made from it.
    event_id = new_event_id()
    try:
        routed = route(uow.ledger, target, text=content, source_event_id=event_id)
    except NotForkable as error:
        assert target is not None  # only a thread target forks
        if uow.ledger.threads.get_turn(target.value) is None:
            raise NotFound(f"no turn {target.value!r}") from error
        raise
    planned = _planned(uow.ledger, target) if routed.how == "smart" else routed.session
    # Exactly the session routed to: a thread's session is that thread's, whatever
    # aliases a merge left on its label since.
    queued = send_checked(
        uow,
        doors,
        routed.session,
        content,
        mode=mode,
        source=source,
        model_overrides=model_overrides,
        event_id=event_id,
    )
    uow.commit()
    session = queued.session
    return RoutedMessage(
        routed=routed,
        queued=queued,
        smart_changed=planned is None or planned.id != session.id,
        reason=_reason(target, routed, session),
    )


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
