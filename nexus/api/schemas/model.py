"""Model configuration over HTTP: the `model_config` a caller sends, and what it resolves to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel

from nexus.engine.model_config import EffectiveConfig, ModelConfigError, parse, to_json

T = TypeVar("T")


def _checked(value: dict[str, Any]) -> dict[str, Any]:
    """The layer as the ledger stores it, or a 422 saying what the API would refuse. A null
    field stays null: on PATCH it clears the one stored."""
    try:
        stored = to_json(parse(value))
    except ModelConfigError as error:
        raise ValueError(str(error)) from error
    return {name: stored.get(name) for name in value}


# seed 000 ModelConfig: {"model", "thinking": {"type", "budget_tokens"}, "max_tokens",
# "temperature"}, each optional.
ModelConfigBody = Annotated[dict[str, Any], AfterValidator(_checked)]


def patched(stored: Mapping[str, Any] | None, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored layer after a PATCH: the fields given replace theirs, a null one clears it,
    the others stay; `model_config: null` (given None) clears them all."""
    if given is None:
        return {}
    merged = {**(stored or {}), **given}
    return {name: value for name, value in merged.items() if value is not None}


def without_nulls(given: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A per-turn or new layer: null means "not said here"; nothing said is None."""
    found = {name: value for name, value in (given or {}).items() if value is not None}
    return found or None


class ModelSettingView(BaseModel, Generic[T]):
    value: T
    source: str  # "turn", "session", "persona" or "default"


class ModelSettingsView(BaseModel):
    """The model configuration a turn would run with now, each field with its layer."""

    model: ModelSettingView[str]
    thinking: ModelSettingView[dict[str, Any] | None]
    max_tokens: ModelSettingView[int]
    temperature: ModelSettingView[float | None]


def settings_view(config: EffectiveConfig) -> ModelSettingsView:
    stored = config.stored()
    sources = config.sources

    def field(name: str) -> dict[str, Any]:
        return {"value": stored.get(name), "source": sources.get(name, "default")}

    return ModelSettingsView(
        model=ModelSettingView[str](**field("model")),
        thinking=ModelSettingView[dict[str, Any] | None](**field("thinking")),
        max_tokens=ModelSettingView[int](**field("max_tokens")),
        temperature=ModelSettingView[float | None](**field("temperature")),
    )
