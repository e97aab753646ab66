"""The built-in scripted model: its per-call delay (NEXUS_SCRIPTED_DELAY_MS, a stand-in for a
real model's latency in benchmarks) and its bounded memory of requests."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from nexus.adapters.models import ModelCatalog
from nexus.adapters.scripted import RECENT_REQUESTS, ScriptedModel
from nexus.engine.model import ModelDone, ModelRequest
from nexus.settings import Settings


def _request() -> ModelRequest:
    return ModelRequest(model="scripted", system="", messages=({"role": "user", "content": "hi"},))


def test_the_setting_reaches_the_built_in_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_SCRIPTED_DELAY_MS", "250")
    model = ModelCatalog(Settings())("scripted")
    assert isinstance(model, ScriptedModel)
    assert model.call_delay_s == 0.25


def test_no_delay_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEXUS_SCRIPTED_DELAY_MS", raising=False)
    model = ModelCatalog(Settings())("scripted")
    assert isinstance(model, ScriptedModel) and model.call_delay_s == 0


def test_every_call_waits_before_its_first_event() -> None:
    model = ScriptedModel(call_delay_s=0.05)
    for _ in range(2):
        started = time.perf_counter()
        events = list(model.stream(_request()))
        assert time.perf_counter() - started >= 0.05
        assert isinstance(events[-1], ModelDone)


def test_it_remembers_only_the_latest_requests() -> None:
    model = ScriptedModel()
    for number in range(RECENT_REQUESTS + 50):
        request = ModelRequest(
            model="scripted", system="", messages=({"role": "user", "content": f"m{number}"},)
        )
        list(model.stream(request))
    assert len(model.requests) == RECENT_REQUESTS
    assert model.requests[0].messages[0]["content"] == "m50"
    assert model.requests[-1].messages[0]["content"] == f"m{RECENT_REQUESTS + 49}"


def _input_tokens(model: ScriptedModel, request: ModelRequest) -> int:
    done = list(model.stream(request))[-1]
    assert isinstance(done, ModelDone)
    return done.usage.input_tokens


def _history(turns: int) -> list[dict[str, object]]:
    return [
        {"role": role, "content": [{"type": "text", "text": f"{role} says {n} " * 5}]}
        for n in range(turns)
        for role in ("user", "assistant")
    ]


def test_its_input_estimate_is_the_requests_json_size_over_four() -> None:
    messages = _history(3)
    request = ModelRequest(model="scripted", system="be brief", messages=tuple(messages))
    expected = (len("be brief") + sum(len(json.dumps(m)) for m in messages)) // 4
    assert _input_tokens(ScriptedModel(), request) == expected


def test_a_growing_history_is_serialised_once_per_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next turn's request shares the earlier content lists (in dicts copied as the
    turn machine copies them): only the new messages are measured again, and the estimate
    is the same as measuring everything."""
    model, history = ScriptedModel(), _history(40)
    _input_tokens(model, ModelRequest(model="scripted", system="", messages=tuple(history)))
    grown = [dict(m) for m in history] + _history(1)
    measured: list[object] = []
    real_dumps = json.dumps

    def counting(value: object, *args: Any, **kwargs: Any) -> str:
        measured.append(value)
        return real_dumps(value, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", counting)
    tokens = _input_tokens(model, ModelRequest(model="scripted", system="", messages=tuple(grown)))
    monkeypatch.undo()
    assert tokens == sum(len(json.dumps(m)) for m in grown) // 4
    # The two new messages, and the answer's own content (its output estimate).
    assert len(measured) == 3


def test_a_changed_message_is_measured_again() -> None:
    model = ScriptedModel()
    content = [{"type": "text", "text": "short"}]
    first = ModelRequest(
        model="scripted", system="", messages=({"role": "user", "content": content},)
    )
    before = _input_tokens(model, first)
    other = [{"type": "text", "text": "a much longer message " * 20}]
    second = ModelRequest(
        model="scripted", system="", messages=({"role": "user", "content": other},)
    )
    assert _input_tokens(model, second) > before
