"""`--model`, `--thinking`, `--max-tokens`, `--temperature`: a model_config from the CLI."""

from __future__ import annotations

from typing import Any

import typer

# `--thinking off` switches thinking off here, whatever the layers below say.
OFF = "off"
MODEL_HELP = "Model name"
THINKING_HELP = f"Extended thinking budget in tokens (>= 1024), or {OFF!r}"
MAX_TOKENS_HELP = "Max tokens of an answer (above the thinking budget)"
TEMPERATURE_HELP = "Temperature, 0 to 1 (not with thinking)"
# Where a layer keeps its own settings (a persona's defaults, a session's), `--thinking
# default` (and the like) clears that layer's value.
CLEAR = "default"
CLEARABLE_THINKING = typer.Option(None, "--thinking", help=f"{THINKING_HELP}, or {CLEAR!r}.")
CLEARABLE_MAX_TOKENS = typer.Option(None, "--max-tokens", help=f"{MAX_TOKENS_HELP}, or {CLEAR!r}.")
CLEARABLE_TEMPERATURE = typer.Option(
    None, "--temperature", help=f"{TEMPERATURE_HELP}, or {CLEAR!r}."
)


def _number(name: str, given: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(given)
    except ValueError as error:
        raise typer.BadParameter(f"{name} is a number, not {given!r}") from error


def model_config(
    *,
    model: str | None,
    thinking: str | None,
    max_tokens: str | None,
    temperature: str | None,
    clear: str | None = None,
) -> dict[str, Any] | None:
    """The `model_config` body the options make (None: none given). A value equal to
    `clear` is sent as null, which clears the session's own setting."""
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = None if model == clear else model
    if thinking is not None:
        if thinking == clear:
            body["thinking"] = None
        elif thinking == OFF:
            body["thinking"] = {"type": "disabled"}
        else:
            budget = _number("--thinking", thinking, int)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if max_tokens is not None:
        body["max_tokens"] = (
            None if max_tokens == clear else _number("--max-tokens", max_tokens, int)
        )
    if temperature is not None:
        body["temperature"] = (
            None if temperature == clear else _number("--temperature", temperature, float)
        )
    return body or None


def describe(settings: dict[str, Any] | None) -> str:
    """One line for a turn's or a session's effective model configuration."""
    if not settings:
        return "model: (not recorded)"
    parts = [f"model={settings.get('model')}"]
    thinking = settings.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        parts.append(f"thinking={thinking.get('budget_tokens')}")
    if settings.get("max_tokens") is not None:
        parts.append(f"max_tokens={settings['max_tokens']}")
    if settings.get("temperature") is not None:
        parts.append(f"temperature={settings['temperature']}")
    return " ".join(parts)
