"""The model ports by name: the scripted twin, or Anthropic's API when a key is set."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from nexus.adapters.scripted import ScriptedModel
from nexus.engine.model import ModelPort, ModelUnavailable
from nexus.settings import SCRIPTED_MODEL, Settings


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
