"""Which inbound adapters exist, each built with its secret from the settings."""

from __future__ import annotations

from nexus.adapters.inbound.base import InboundAdapter
from nexus.adapters.inbound.telegram import TelegramAdapter
from nexus.settings import Settings


def _secret(value: object) -> str | None:
    getter = getattr(value, "get_secret_value", None)
    return getter() if callable(getter) else None


def build_adapters(settings: Settings) -> dict[str, InboundAdapter]:
    """Every adapter is always present; one without its secret rejects every request."""
    adapters: list[InboundAdapter] = [
        TelegramAdapter(_secret(settings.telegram_secret_token)),
    ]
    return {adapter.name: adapter for adapter in adapters}
