"""GET and PATCH /v1/sessions/{label}: one session with its effective queue and model
settings (and where each came from); its own settings and its archive state changed."""

from __future__ import annotations

from functools import partial
from typing import Any

from nexus.api.deps import NexusDep, v1_router
from nexus.api.errors import ApiError
from nexus.api.schemas.model import patched, settings_view
from nexus.api.schemas.sessions import (
    PendingView,
    QueueSettingsView,
    SessionDetail,
    SessionSettings,
    SettingView,
)
from nexus.api.sessions import running_view, session_view
from nexus.ledger.enums import DropPolicy, QueueMode, SessionStatus
from nexus.ledger.records import SessionLabel, SessionRecord
from nexus.queueing.settings import EffectiveQueue
from nexus.sessions import service as sessions

# Registered after nexus.api.sessions: its `/{label:path}/…` routes must match first.
router = v1_router("/v1/sessions", "sessions", 404, 409)


# The PATCH body's names → the sessions table's columns.
_COLUMNS = {
    "queue_mode": "queue_mode",
    "cap": "queue_cap",
    "drop": "drop_policy",
    "debounce_ms": "debounce_ms",
}


def queue_settings(found: EffectiveQueue, policy: str | None) -> QueueSettingsView:
    return QueueSettingsView(
        mode=SettingView[QueueMode | None](value=found.mode.value, source=found.mode.source),
        cap=SettingView[int](value=found.cap.value, source=found.cap.source),
        drop=SettingView[DropPolicy](value=found.drop.value, source=found.drop.source),
        debounce_ms=SettingView[int](
            value=found.debounce_ms.value, source=found.debounce_ms.source
        ),
        policy=policy,
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


def detail_view(found: sessions.SessionDetail) -> SessionDetail:
    """The session with its settings, the turn it runs now and what waits."""
    return SessionDetail(
        **session_view(found.entry).model_dump(),
        queue=queue_settings(found.queue, found.policy),
        running=running_view(found.running),
        pending=PendingView(count=found.pending.count, oldest_age_ms=found.pending.oldest_age_ms),
        model_settings=settings_view(found.model) if found.model is not None else None,
        model_settings_error=found.model_error,
    )


@router.get("/{label:path}")
def get_session(label: SessionLabel, graph: NexusDep) -> SessionDetail:
    """One session with its effective queue settings; a label that is an alias (after an
    entity merge, say) gives its target."""
    with graph.database.reading() as uow:
        return detail_view(sessions.get_detail(uow, graph, label))


@router.patch("/{label:path}")
def configure(label: SessionLabel, body: SessionSettings, graph: NexusDep) -> SessionDetail:
    """Change a session's own queue settings (`null` clears one), its `title` and `tags`,
    or archive it (`archived`: an archived session stays readable and forkable, and refuses
    new messages with 409). A deleted session changes no more (409). Answers the session as
    GET does."""
    if not body.model_fields_set:
        raise ApiError(400, "nothing_to_change", "send at least one setting")
    with graph.database.unit_of_work() as uow:
        return detail_view(sessions.configure(uow, graph, label, partial(changes, body)))


@router.delete("/{label:path}")
def delete(label: SessionLabel, graph: NexusDep) -> SessionDetail:
    """Delete the session: its status becomes `deleted`. Its history stays in the ledger
    and readable here (until a new session takes the label, which deleting frees); its
    waiting messages are dropped (disposition `cancelled`), a running turn is asked to stop,
    and new messages to it are refused with 409. Deleting it again changes nothing.
    Answers the session as GET does."""
    return detail_view(sessions.delete(graph, label))
