"""A session's model configuration as the API checks and shows it (over its persona's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nexus.agents import service as personas
from nexus.api.errors import ApiError
from nexus.api.schemas.model import ModelSettingsView, settings_view
from nexus.db import UnitOfWork
from nexus.engine.model_config import ModelConfigError
from nexus.ledger.records import SessionRecord


def check_model(
    uow: UnitOfWork,
    default_model: str,
    session: SessionRecord,
    turn: Mapping[str, Any] | None = None,
) -> None:
    """422 unless the turn's, the session's and its persona's layers make, together, a
    configuration the API takes (the caller's transaction then writes nothing)."""
    try:
        personas.effective_config(uow, session, default_model=default_model, turn=turn)
    except ModelConfigError as error:
        raise ApiError(422, "invalid_model_config", str(error)) from error


def model_settings(
    uow: UnitOfWork, default_model: str, session: SessionRecord
) -> tuple[ModelSettingsView | None, str | None]:
    """What the session's next turn would run with, or why its layers no longer fit."""
    try:
        config = personas.effective_config(uow, session, default_model=default_model)
    except ModelConfigError as error:
        return None, str(error)
    if config is None:  # the persona is gone
        return None, None
    return settings_view(config), None
