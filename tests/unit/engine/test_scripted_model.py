"""The built-in scripted model: its per-call delay (NEXUS_SCRIPTED_DELAY_MS, a stand-in for a
real model's latency in benchmarks) and its bounded memory of requests."""

from __future__ import annotations

import time

import pytest

from nexus.adapters.models import ModelCatalog
from nexus.engine.model import ModelDone, ModelRequest
from nexus.engine.scripted import RECENT_REQUESTS, ScriptedModel
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
