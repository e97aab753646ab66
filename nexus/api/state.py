"""What the API's routes share: settings, the database, adapters, the doorbell, a clock."""

from __future__ import annotations

from dataclasses import dataclass

from nexus.adapters.inbound.base import InboundAdapter
from nexus.api.auth import TokenCheck
from nexus.db import Database
from nexus.doorbell import Doorbell
from nexus.engine.capabilities import CapabilityRegistry
from nexus.ids import Clock
from nexus.ingest.router import QueuePolicy
from nexus.queueing.coordination import Coordination
from nexus.settings import Settings


@dataclass(frozen=True)
class AppState:
    settings: Settings
    database: Database
    adapters: dict[str, InboundAdapter]
    doorbell: Doorbell
    clock: Clock
    tokens: TokenCheck
    capabilities: CapabilityRegistry
    # Signals for a running turn (abort, steer) and the SSE stream's source.
    coordination: Coordination
    queueing: QueuePolicy
