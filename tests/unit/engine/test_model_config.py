"""Model configuration: each layer parsed and checked, the layers resolved field by field."""

from __future__ import annotations

from typing import Any

import pytest

from nexus.engine.model_config import (
    THINKING_OFF,
    ModelConfig,
    ModelConfigError,
    parse,
    resolve,
    to_json,
)


def _resolve(**layers: ModelConfig) -> Any:
    return resolve(default_model="claude-default", default_max_tokens=4096, **layers)


def test_nothing_set_is_the_deployment_default() -> None:
    found = _resolve()
    assert (found.model, found.max_tokens, found.thinking, found.temperature) == (
        "claude-default",
        4096,
        None,
        None,
    )
    assert set(found.sources.values()) == {"default"}


def test_each_field_comes_from_the_highest_layer_that_sets_it() -> None:
    found = _resolve(
        turn=ModelConfig(temperature=0.2),
        session=ModelConfig(model="claude-session", temperature=0.9),
        persona=ModelConfig(model="claude-persona", max_tokens=2000),
    )
    assert (found.model, found.max_tokens, found.temperature) == ("claude-session", 2000, 0.2)
    assert found.sources == {
        "model": "session",
        "thinking": "default",
        "max_tokens": "persona",
        "temperature": "turn",
    }


def test_a_layer_can_switch_off_the_thinking_of_the_layers_below() -> None:
    found = _resolve(
        session=ModelConfig(thinking=THINKING_OFF, temperature=0.5),
        persona=ModelConfig(thinking=2048),
    )
    assert found.thinking is None
    assert found.temperature == 0.5
    assert found.sources["thinking"] == "session"


def test_a_thinking_budget_without_max_tokens_gets_the_default_on_top() -> None:
    found = _resolve(turn=ModelConfig(thinking=8000))
    assert (found.thinking, found.max_tokens) == (8000, 8000 + 4096)


def test_a_budget_at_or_over_max_tokens_is_refused_with_where_each_came_from() -> None:
    with pytest.raises(ModelConfigError, match=r"2048, from the turn.*2048, from the session"):
        _resolve(turn=ModelConfig(thinking=2048), session=ModelConfig(max_tokens=2048))


def test_temperature_with_thinking_is_refused_across_layers() -> None:
    with pytest.raises(ModelConfigError, match=r"temperature .*from the persona.*thinking"):
        _resolve(turn=ModelConfig(thinking=2048), persona=ModelConfig(temperature=0.3))


def test_a_layer_parses_from_json_and_back() -> None:
    data = {
        "model": "claude-x",
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "max_tokens": 9000,
    }
    config = parse(data)
    assert config == ModelConfig(model="claude-x", thinking=2048, max_tokens=9000)
    assert to_json(config) == data
    assert parse({"thinking": {"budget_tokens": 1024}}).thinking == 1024
    assert parse({"thinking": {"type": "disabled"}}).thinking == THINKING_OFF
    assert to_json(parse({"thinking": {"type": "disabled"}})) == {"thinking": {"type": "disabled"}}
    assert parse(None).empty and parse({}).empty
    assert parse({"temperature": 0}).temperature == 0.0


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"thinking": {"budget_tokens": 1023}}, "at least 1024"),
        ({"thinking": {"budget_tokens": "lots"}}, "whole number"),
        ({"thinking": 2048}, "budget_tokens"),
        ({"thinking": {"type": "sometimes"}}, "'enabled' or 'disabled'"),
        ({"thinking": {"budget_tokens": 2048, "depth": 1}}, "no field 'depth'"),
        ({"temperature": 1.5}, "from 0 to 1"),
        ({"temperature": -0.1}, "from 0 to 1"),
        ({"temperature": True}, "number"),
        ({"max_tokens": 0}, "between 1"),
        ({"max_tokens": 1.5}, "whole number"),
        ({"model": ""}, "model name"),
        ({"model": "a\nb"}, "control characters"),
        ({"top_k": 3}, "no field 'top_k'"),
        ({"thinking": {"budget_tokens": 2048}, "temperature": 0.5}, "cannot be set with"),
        ({"thinking": {"budget_tokens": 4096}, "max_tokens": 4096}, "below max_tokens"),
    ],
)
def test_what_the_api_would_refuse_is_refused_with_a_reason(
    data: dict[str, Any], says: str
) -> None:
    with pytest.raises(ModelConfigError, match=says):
        parse(data)


def test_the_effective_config_is_stored_with_its_sources() -> None:
    stored = _resolve(turn=ModelConfig(thinking=2048)).stored()
    assert stored["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert stored["max_tokens"] == 2048 + 4096
    assert stored["model"] == "claude-default"
    assert stored["sources"]["thinking"] == "turn"
    assert "temperature" not in stored
