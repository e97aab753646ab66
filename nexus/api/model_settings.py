"""A session's model configuration as the API checks and shows it (over its persona's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexus.api.errors import ApiError
from nexus.api.schemas.model import ModelSettingsView, settings_view
from nexus.db import UnitOfWork
from nexus.engine.model_config import ModelConfigError, effective_for
from nexus.ledger.records import SessionRecord


def check_model(
    uow: UnitOfWork,
    default_model: str,
    session: SessionRecord,
    turn: Mapping[str, Any] | None = None,
) -> None:
    """422 unless the turn's, the session's and its persona's layers make, together, a
    configuration the API takes (the caller's transaction then writes nothing)."""
    persona = uow.ledger.agents.get(session.persona_id)
    if persona is None:
        return
    try:
        effective_for(persona, session, turn=turn, default_model=default_model)
    except ModelConfigError as error:
        raise ApiError(422, "invalid_model_config", str(error)) from error


def model_settings(
    uow: UnitOfWork, default_model: str, session: SessionRecord
) -> tuple[ModelSettingsView | None, str | None]:
    """What the session's next turn would run with, or why its layers no longer fit."""
    persona = uow.ledger.agents.get(session.persona_id)
    if persona is None:
        return None, None
    try:
        config = effective_for(persona, session, default_model=default_model)
    except ModelConfigError as error:
        return None, str(error)
    return settings_view(config), None
