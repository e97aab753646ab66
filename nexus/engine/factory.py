"""Build an Engine from the settings: which model answers, which tools exist."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from nexus.db import Database
from nexus.engine.builtin_tools import builtin_registry
from nexus.engine.capabilities import CapabilityRegistry
from nexus.engine.model import ModelPort
from nexus.engine.scripted import ScriptedModel
from nexus.engine.service import Engine
from nexus.engine.signals import NoSignals, TurnSignals
from nexus.engine.stream import NullPublisher, StreamPublisher
from nexus.ingest.doorbell import Doorbell
from nexus.settings import SCRIPTED_MODEL, Settings


class ModelUnavailable(Exception):
    """A persona names a model this deployment cannot reach (say, no API key)."""


@dataclass
class ModelCatalog:
    """One port per model name, built on first use; `scripted` needs nothing at all."""

    settings: Settings
    _ports: dict[str, ModelPort] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, name: str) -> ModelPort:
        with self._lock:
            port = self._ports.get(name)
            if port is None:
                port = self._ports[name] = self._build(name)
            return port

    def _build(self, name: str) -> ModelPort:
        if name == SCRIPTED_MODEL:
            return ScriptedModel(call_delay_s=self.settings.scripted_delay_ms / 1000)
        key = self.settings.anthropic_api_key
        if key is None:
            raise ModelUnavailable(
                f"model {name!r} needs ANTHROPIC_API_KEY; set it, or use NEXUS_MODEL=scripted"
            )
        from nexus.adapters.anthropic.model import AnthropicModel  # the SDK loads only if used

        return AnthropicModel(
            api_key=key.get_secret_value(),
            base_url=self.settings.anthropic_base_url,
            timeout_s=float(self.settings.model_timeout_seconds),
            max_retries=self.settings.model_max_retries,
        )


def build_engine(
    settings: Settings,
    database: Database,
    *,
    signals: TurnSignals | None = None,
    publisher: StreamPublisher | None = None,
    doorbell: Doorbell | None = None,
) -> Engine:
    from nexus.agents.results import worker_result_hook
    from nexus.agents.tools import AgentTools
    from nexus.outbound.planning import reply_hook

    tools = builtin_registry()
    for tool in AgentTools(database, doorbell, max_depth=settings.max_worker_depth).tools():
        tools.register(tool)
    return Engine(
        database=database,
        model_for=ModelCatalog(settings),
        default_model=settings.default_model,
        tools=tools,
        # In the turn's own transaction: a worker's result for its manager, and a reply's
        # deliveries for the platform it answers.
        commit_hooks=(worker_result_hook(doorbell), reply_hook(doorbell)),
        capabilities=CapabilityRegistry(),
        signals=signals or NoSignals(),
        publisher=publisher or NullPublisher(),
        max_tool_iterations=settings.max_tool_iterations,
        context_window=settings.context_window,
    )
