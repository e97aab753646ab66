"""GET and PATCH /v1/sessions/{label}: one session with its effective queue and model
settings (and where each came from); its own settings and its archive state changed."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from nexus.api.deps import AUTHENTICATED, NexusDep
from nexus.api.errors import ApiError, error_responses
from nexus.api.model_settings import check_model, model_settings
from nexus.api.schemas.model import patched
from nexus.api.schemas.sessions import (
    PendingView,
    QueueSettingsView,
    SessionDetail,
    SessionSettings,
    SettingView,
)
from nexus.api.sessions import resolve_any, running_view, session_view
from nexus.arrival.messages import OWN_ADAPTERS
from nexus.arrival.settings import (
    archived_reason,
    policy_for_session,
    policy_overrides,
    session_overrides,
)
from nexus.bootstrap import Nexus
from nexus.db import UnitOfWork
from nexus.ledger.enums import OPEN_QUEUE_STATUSES, DropPolicy, QueueMode, SessionStatus
from nexus.ledger.records import SessionLabel, SessionRecord
from nexus.ledger.repository import SessionDeleted
from nexus.queueing.pending import pending
from nexus.queueing.settings import QueueOverrides, effective_queue
from nexus.sessions.deletion import delete_session

# Registered after nexus.api.sessions: its `/{label:path}/…` routes must match first.
router = APIRouter(
    prefix="/v1/sessions",
    tags=["sessions"],
    dependencies=AUTHENTICATED,
    responses=error_responses(404, 409),
)


# The PATCH body's names → the sessions table's columns.
_COLUMNS = {
    "queue_mode": "queue_mode",
    "cap": "queue_cap",
    "drop": "drop_policy",
    "debounce_ms": "debounce_ms",
}


def queue_settings(uow: UnitOfWork, graph: Nexus, session: SessionRecord) -> QueueSettingsView:
    # The same layers an input to the session arrives under (nexus/arrival/settings.py).
    decision = policy_for_session(uow, graph.policies, session, not_from=OWN_ADAPTERS)
    policy = policy_overrides(decision) if decision is not None else QueueOverrides()
    found = effective_queue(session_overrides(session), policy, graph.queue_policy.defaults)
    return QueueSettingsView(
        mode=SettingView[QueueMode | None](value=found.mode.value, source=found.mode.source),
        cap=SettingView[int](value=found.cap.value, source=found.cap.source),
        drop=SettingView[DropPolicy](value=found.drop.value, source=found.drop.source),
        debounce_ms=SettingView[int](
            value=found.debounce_ms.value, source=found.debounce_ms.source
        ),
        policy=decision.policy if decision is not None else None,
    )


def changes(body: SessionSettings, session: SessionRecord) -> dict[str, Any]:
    """The columns PATCH writes: only the fields the caller sent (null included)."""
    values: dict[str, Any] = {
        _COLUMNS[name]: getattr(body, name) for name in body.model_fields_set if name in _COLUMNS
    }
    if "model_overrides" in body.model_fields_set:
        own = patched(session.model_overrides, body.model_overrides)
        values["model_overrides"] = own or None
    for name in ("title", "tags"):
        if name in body.model_fields_set:
            values[name] = getattr(body, name)
    if "tags" in values and values["tags"] is not None:
        values["tags"] = list(dict.fromkeys(values["tags"])) or None  # each once, in order
    if "archived" in body.model_fields_set:
        if body.archived is None:
            raise ApiError(422, "invalid_request", "archived is true or false, not null")
        values["status"] = SessionStatus.ARCHIVED if body.archived else SessionStatus.ACTIVE
    return values


def session_detail(uow: UnitOfWork, graph: Nexus, session: SessionRecord) -> SessionDetail:
    """The session with its settings, the turn it runs now and what waits."""
    view = session_view(uow, session)
    waiting = uow.ledger.queue.for_session(session.id, statuses=list(OPEN_QUEUE_STATUSES))
    found = pending(waiting, now_ms=uow.ledger.clock())
    model, refused = model_settings(uow, graph.settings.default_model, session)
    return SessionDetail(
        **view.model_dump(),
        queue=queue_settings(uow, graph, session),
        running=running_view(graph.coordination.running(session.id)),
        pending=PendingView(count=found.count, oldest_age_ms=found.oldest_age_ms),
        model_settings=model,
        model_settings_error=refused,
    )


@router.get("/{label:path}")
def get_session(label: SessionLabel, graph: NexusDep) -> SessionDetail:
    """One session with its effective queue settings; a label that is an alias (after an
    entity merge, say) gives its target."""
    with graph.database.reading() as uow:
        return session_detail(uow, graph, resolve_any(uow, label))


@router.patch("/{label:path}")
def configure(label: SessionLabel, body: SessionSettings, graph: NexusDep) -> SessionDetail:
    """Change a session's own queue settings (`null` clears one), its `title` and `tags`,
    or archive it (`archived`: an archived session stays readable and forkable, and refuses
    new messages with 409). A deleted session changes no more (409). Answers the session as
    GET does."""
    if not body.model_fields_set:
        raise ApiError(400, "nothing_to_change", "send at least one setting")
    with graph.database.unit_of_work() as uow:
        session = resolve_any(uow, label)
        if session.status == SessionStatus.DELETED:
            raise SessionDeleted(archived_reason(session))
        values = changes(body, session)
        if "model_overrides" in values:
            check_model(uow, graph.settings.default_model, session.model_copy(update=values))
        session = uow.ledger.sessions.configure(session.id, values)
        detail = session_detail(uow, graph, session)
        uow.commit()
    return detail


@router.delete("/{label:path}")
def delete(label: SessionLabel, graph: NexusDep) -> SessionDetail:
    """Delete the session: its status becomes `deleted`. Its history stays in the ledger
    and readable here (until a new session takes the label, which deleting frees); its
    waiting messages are dropped (disposition `cancelled`), a running turn is asked to stop,
    and new messages to it are refused with 409. Deleting it again changes nothing.
    Answers the session as GET does."""
    with graph.database.reading() as uow:
        session = resolve_any(uow, label)
    delete_session(graph.database, graph.coordination, session.id)
    with graph.database.reading() as uow:
        found = uow.ledger.sessions.get(session.id)
        assert found is not None  # deleting keeps the row
        return session_detail(uow, graph, found)
