"""The one composition root: each entry point's object graph, built from the Settings.

`graph.py` holds the graph (`Nexus`), `adapters.py` the builders that pick an adapter by
setting; this module, the graph each kind of process gets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus.adapters.models import ModelCatalog
from nexus.bootstrap.graph import Nexus
from nexus.db import Database
from nexus.doorbell import Doorbell
from nexus.ids import Clock, now_ms
from nexus.operations.status import WorkerPing
from nexus.outbound.ports import Sender
from nexus.queueing.coordination import Coordination
from nexus.settings import Settings

if TYPE_CHECKING:
    from celery import Celery


def bootstrap(
    settings: Settings,
    *,
    database: Database | None = None,
    doorbell: Doorbell | None = None,
    coordination: Coordination | None = None,
    models: ModelCatalog | None = None,
    senders: dict[str, Sender] | None = None,
    worker_ping: WorkerPing | None = None,
    clock: Clock = now_ms,
) -> Nexus:
    """The graph for an API, CLI or beat process: it publishes on the broker, runs no tasks."""
    return Nexus(
        settings,
        database=database,
        doorbell=doorbell,
        coordination=coordination,
        models=models,
        senders=senders,
        worker_ping=worker_ping,
        clock=clock,
    )


def bootstrap_worker(settings: Settings, *, celery: Celery | None = None) -> Nexus:
    """The graph for a process that runs tasks: a Celery worker child (rebuilt after the
    fork, around the app it runs) or `nexus dev`'s embedded worker. The app's tasks find
    it as `app.nexus`."""
    graph = Nexus(settings, consumes_broker=True, celery=celery)
    # Read now, not at the first turn: a bad price file stops the worker as it starts,
    # saying which entry is wrong, rather than failing every turn it would price.
    graph.prices  # noqa: B018
    graph.own_addresses  # noqa: B018 - likewise a bad NEXUS_OWN_ADDRESSES
    # Built now, not by the first message: the router, the session runner, the turn service
    # with its tools and the reply senders take ~250 ms to build, which the first message
    # after a worker starts (or each of its pool processes) would otherwise wait for.
    graph.router  # noqa: B018
    graph.celery.nexus = graph
    return graph


__all__ = ["Nexus", "bootstrap", "bootstrap_worker"]
