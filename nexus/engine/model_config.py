"""Model configuration (docs/engine.md): parse a layer, resolve the layers, check it.

A layer is what one level says: the turn (carried on its event), the session, the persona,
the deployment. Each field is resolved on its own, the highest layer that sets it wins.
Thinking is a budget of tokens; a layer may also switch it off (`{"type": "disabled"}`),
which a lower layer's budget does not override.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from nexus.ledger.records import AgentRecord, SessionRecord

# The Messages API's rules: a thinking budget is at least 1024 tokens and below max_tokens;
# temperature lies in 0..1 and is refused together with thinking.
MIN_THINKING_BUDGET = 1024
MAX_MAX_TOKENS = 128_000
DEFAULT_MAX_TOKENS = 4096  # the deployment's max_tokens when no layer sets one
THINKING_OFF = 0  # a layer that switches thinking off, whatever the layers below say

Source = Literal["turn", "session", "persona", "default"]
FIELDS = ("model", "thinking", "max_tokens", "temperature")


class ModelConfigError(ValueError):
    """A model configuration the API would refuse, with a sentence saying why."""


@dataclass(frozen=True)
class ModelConfig:
    """One layer: None means "not said here"."""

    model: str | None = None
    thinking: int | None = None  # a budget in tokens; THINKING_OFF switches it off
    max_tokens: int | None = None
    temperature: float | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in FIELDS)


@dataclass(frozen=True)
class EffectiveConfig:
    """What a model call is made with, and which layer gave each field."""

    model: str
    max_tokens: int
    thinking: int | None = None  # the budget, or None when thinking is off
    temperature: float | None = None
    sources: Mapping[str, Source] = field(default_factory=dict)

    def stored(self) -> dict[str, Any]:
        """The turn's record of it (turns.model_settings) and the API's view."""
        found = to_json(ModelConfig(self.model, self.thinking, self.max_tokens, self.temperature))
        found["sources"] = dict(self.sources)
        return found


def parse(data: Mapping[str, Any] | None) -> ModelConfig:
    """A layer from its JSON: {"model", "thinking": {"type", "budget_tokens"}, "max_tokens",
    "temperature"}; each optional. Raises ModelConfigError for anything else."""
    if not data:
        return ModelConfig()
    if not isinstance(data, Mapping):
        raise ModelConfigError("model_config is an object")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ModelConfigError(
            f"model_config has no field {unknown[0]!r} (it takes {', '.join(FIELDS)})"
        )
    config = ModelConfig(
        model=_model(data.get("model")),
        thinking=_thinking(data.get("thinking")),
        max_tokens=_max_tokens(data.get("max_tokens")),
        temperature=_temperature(data.get("temperature")),
    )
    check_layer(config)
    return config


def merge(*layers: ModelConfig) -> ModelConfig:
    """Several layers of one level as one, later over earlier (a turn's batched queries)."""
    found = ModelConfig()
    for layer in layers:
        found = ModelConfig(
            **{
                name: getattr(layer, name)
                if getattr(layer, name) is not None
                else getattr(found, name)
                for name in FIELDS
            }
        )
    return found


def to_json(config: ModelConfig) -> dict[str, Any]:
    """A layer as stored and shown: only what it says."""
    found: dict[str, Any] = {}
    if config.model is not None:
        found["model"] = config.model
    if config.thinking is not None:
        found["thinking"] = (
            {"type": "disabled"}
            if config.thinking == THINKING_OFF
            else {"type": "enabled", "budget_tokens": config.thinking}
        )
    if config.max_tokens is not None:
        found["max_tokens"] = config.max_tokens
    if config.temperature is not None:
        found["temperature"] = config.temperature
    return found


def check_layer(config: ModelConfig) -> None:
    """What one layer may not say on its own."""
    if config.thinking and config.temperature is not None:
        raise ModelConfigError(
            "temperature cannot be set with thinking (the API refuses it): set one of them"
        )
    if config.thinking and config.max_tokens is not None and config.thinking >= config.max_tokens:
        raise ModelConfigError(
            f"the thinking budget ({config.thinking}) must be below max_tokens "
            f"({config.max_tokens})"
        )


def resolve(
    *,
    turn: ModelConfig = ModelConfig(),
    session: ModelConfig = ModelConfig(),
    persona: ModelConfig = ModelConfig(),
    default_model: str,
    default_max_tokens: int,
) -> EffectiveConfig:
    """Field by field: the turn over the session over the persona over the deployment.

    Without a max_tokens from any layer, a thinking budget gets the default on top of it
    (the API wants max_tokens above the budget; the answer still needs room). Raises
    ModelConfigError when the result is one the API would refuse."""
    layers: tuple[tuple[Source, ModelConfig], ...] = (
        ("turn", turn),
        ("session", session),
        ("persona", persona),
    )
    sources: dict[str, Source] = {}

    def pick(name: str) -> Any:
        for source, layer in layers:
            value = getattr(layer, name)
            if value is not None:
                sources[name] = source
                return value
        sources[name] = "default"
        return None

    model = pick("model") or default_model
    thinking = pick("thinking") or None  # THINKING_OFF resolves to off
    max_tokens = pick("max_tokens")
    if max_tokens is None:
        max_tokens = default_max_tokens + (thinking or 0)
    temperature = pick("temperature")
    effective = EffectiveConfig(
        model=model,
        max_tokens=max_tokens,
        thinking=thinking,
        temperature=temperature,
        sources=sources,
    )
    check_effective(effective)
    return effective


def persona_layer(persona: AgentRecord) -> ModelConfig:
    """The persona's defaults: its model configuration, its `default_model` for the model."""
    layer = parse(persona.default_model_config)
    if layer.model is None and persona.default_model:
        layer = dataclasses.replace(layer, model=persona.default_model)
    return layer


def effective_for(
    persona: AgentRecord,
    session: SessionRecord | None,
    *,
    turn: Mapping[str, Any] | None = None,
    default_model: str,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
) -> EffectiveConfig:
    """What a turn of `session` would run with now (and the API checks before it stores a
    layer): raises ModelConfigError when the layers together are refused."""
    return resolve(
        turn=parse(turn),
        session=parse(session.model_overrides if session is not None else None),
        persona=persona_layer(persona),
        default_model=default_model,
        default_max_tokens=default_max_tokens,
    )


def check_effective(config: EffectiveConfig) -> None:
    if config.thinking is not None and config.temperature is not None:
        raise ModelConfigError(
            f"temperature (from the {config.sources.get('temperature')}) cannot be used with "
            f"thinking (from the {config.sources.get('thinking')}): the API refuses both together"
        )
    if config.thinking is not None and config.thinking >= config.max_tokens:
        raise ModelConfigError(
            f"the thinking budget ({config.thinking}, from the "
            f"{config.sources.get('thinking')}) must be below max_tokens ({config.max_tokens}, "
            f"from the {config.sources.get('max_tokens')})"
        )


def _model(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise ModelConfigError("model is a model name (1 to 255 characters)")
    if any(ord(c) < 32 or c == "\x7f" for c in value):
        raise ModelConfigError("model cannot contain control characters")
    return value


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelConfigError(f"{name} is a whole number")
    return value


def _thinking(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ModelConfigError(
            'thinking is {"type": "enabled", "budget_tokens": N} or {"type": "disabled"}'
        )
    kind = value.get("type", "enabled")
    extra = sorted(set(value) - {"type", "budget_tokens"})
    if extra:
        raise ModelConfigError(f"thinking has no field {extra[0]!r}")
    if kind == "disabled":
        if "budget_tokens" in value:
            raise ModelConfigError("disabled thinking takes no budget_tokens")
        return THINKING_OFF
    if kind != "enabled":
        raise ModelConfigError("thinking's type is 'enabled' or 'disabled'")
    budget = _integer(value.get("budget_tokens"), "thinking.budget_tokens")
    if budget < MIN_THINKING_BUDGET:
        raise ModelConfigError(
            f"thinking.budget_tokens is at least {MIN_THINKING_BUDGET} (the API's minimum)"
        )
    if budget >= MAX_MAX_TOKENS:
        raise ModelConfigError(f"thinking.budget_tokens is below {MAX_MAX_TOKENS}")
    return budget


def _max_tokens(value: Any) -> int | None:
    if value is None:
        return None
    tokens = _integer(value, "max_tokens")
    if not 1 <= tokens <= MAX_MAX_TOKENS:
        raise ModelConfigError(f"max_tokens is between 1 and {MAX_MAX_TOKENS}")
    return tokens


def _temperature(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ModelConfigError("temperature is a number from 0 to 1")
    if not 0 <= value <= 1:
        raise ModelConfigError("temperature is from 0 to 1")
    return float(value)
