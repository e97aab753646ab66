"""Model configuration over HTTP: the `model_config` a caller sends, and what it resolves to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, WithJsonSchema

from nexus.engine.model_config import (
    MAX_MAX_TOKENS,
    MIN_THINKING_BUDGET,
    EffectiveConfig,
    ModelConfigError,
    parse,
    to_json,
)

T = TypeVar("T")


def _checked(value: dict[str, Any]) -> dict[str, Any]:
    """The layer as the ledger stores it, or a 422 saying what the API would refuse. A null
    field stays null: on PATCH it clears the one stored."""
    try:
        stored = to_json(parse(value))
    except ModelConfigError as error:
        raise ValueError(str(error)) from error
    return {name: stored.get(name) for name in value}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


# What `parse` takes, field by field, as the OpenAPI document says it (a null field clears
# one on PATCH). The rules across fields (thinking with temperature, a budget below
# max_tokens) are the validator's alone: JSON Schema cannot say them.
MODEL_CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "model": _nullable(
            {
                "type": "string",
                "minLength": 1,
                "maxLength": 255,
                "pattern": r"^[^\x00-\x1f\x7f]*\S[^\x00-\x1f\x7f]*$",
            }
        ),
        "thinking": _nullable(
            {
                "oneOf": [
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["budget_tokens"],
                        "properties": {
                            "type": {"const": "enabled"},
                            "budget_tokens": {
                                "type": "integer",
                                "minimum": MIN_THINKING_BUDGET,
                                "exclusiveMaximum": MAX_MAX_TOKENS,
                            },
                        },
                    },
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["type"],
                        "properties": {"type": {"const": "disabled"}},
                    },
                ]
            }
        ),
        "max_tokens": _nullable({"type": "integer", "minimum": 1, "maximum": MAX_MAX_TOKENS}),
        "temperature": _nullable({"type": "number", "minimum": 0, "maximum": 1}),
    },
}
# A model configuration: {"model", "thinking": {"type", "budget_tokens"}, "max_tokens",
# "temperature"}, each optional (docs/engine.md, "Model configuration").
ModelConfigBody = Annotated[
    dict[str, Any], AfterValidator(_checked), WithJsonSchema(MODEL_CONFIG_SCHEMA)
]


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
