"""The object graph is built in nexus/bootstrap/ alone, and each entry point takes it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from celery import current_app

from nexus.adapters.celery_broker import CeleryDoorbell
from nexus.bootstrap import Nexus, bootstrap, bootstrap_worker
from nexus.doorbell import CoalescingDoorbell, DeferredDoorbell, RecordingDoorbell
from nexus.queueing.coordination import InProcessCoordination
from nexus.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
# Constructing any of these is wiring: only the composition root may do it.
WIRING = re.compile(
    r"\b(Database|SessionRunner|TurnService|HookRunner|DeliveryService|CeleryDoorbell|ModelCatalog"
    r"|InProcessCoordination|DeferredDoorbell|AgentTools|InProcessRateLimiter)\("
    r"|RedisCoordination\.from_url|RedisRateLimiter\.from_url"
    r"|\b(create_celery|build_senders|build_adapters|load_policies)\("
)


def _embedded(tmp_path: Path, **fields: object) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'n.db'}", **fields)  # type: ignore[arg-type]


def test_only_the_composition_root_builds_the_object_graph() -> None:
    offenders = []
    for package in ("nexus", "workers", "beat"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ROOT / "nexus" / "bootstrap" in path.parents:
                continue
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                code = line.split("#", 1)[0]
                if WIRING.search(code) and not re.match(r"\s*(def|class) ", code):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_worker_child_rebuilds_its_graph_by_bootstrapping_again(tmp_path: Path) -> None:
    from workers import tasks

    parent = bootstrap_worker(_embedded(tmp_path))
    app = parent.celery
    assert app is current_app._get_current_object()
    assert app.nexus is parent and tasks._runtime() is parent
    parent.database.engine  # noqa: B018 - a pool the parent opened before the fork
    tasks._after_fork()
    child = tasks._runtime()
    assert isinstance(child, Nexus) and child is not parent
    # A fresh graph, with nothing shared: its own database, coordination and broker ring.
    assert child.database is not parent.database and parent.database._engine is None
    assert child.coordination is not parent.coordination
    assert child.celery is app and isinstance(child.doorbell, CoalescingDoorbell)


def test_each_process_kind_rings_the_way_it_can(tmp_path: Path) -> None:
    embedded = _embedded(tmp_path)  # no Redis: the broker is memory://
    # A process beside `nexus dev` cannot reach its in-process broker: the relay rings.
    assert isinstance(bootstrap(embedded).doorbell, DeferredDoorbell)
    # The router is rung once per drain where every ringing process sees the flag: Redis,
    # or the one process the in-process broker lives in.
    assert isinstance(bootstrap_worker(embedded).doorbell, CoalescingDoorbell)
    shared = _embedded(tmp_path, redis_url="redis://127.0.0.1:6379/15")
    assert isinstance(bootstrap(shared).doorbell, CoalescingDoorbell)
    # Another broker without Redis: no shared flag, so every event rings.
    other = _embedded(tmp_path, NEXUS_BROKER_URL="amqp://guest@127.0.0.1//")
    assert type(bootstrap(other).doorbell) is CeleryDoorbell


def test_parts_are_built_once_on_first_use_and_can_be_replaced(tmp_path: Path) -> None:
    doorbell, coordination = RecordingDoorbell(), InProcessCoordination()
    graph = bootstrap(_embedded(tmp_path), doorbell=doorbell, coordination=coordination)
    # Nothing is connected before it is used (invariant 8, docs/architecture.md).
    assert graph.database._engine is None and "turns" not in vars(graph)
    assert graph.doorbell is doorbell and graph.coordination is coordination
    assert graph.turns is graph.turns and graph.session_runner.turns is graph.turns
    assert graph.session_runner.doorbell is doorbell
    assert graph.turns.publisher is coordination and graph.turns.capabilities is (
        graph.capabilities
    )


@pytest.mark.parametrize("module", ["nexus.api.main", "workers.main", "beat.main"])
def test_entry_modules_bootstrap_and_build_nothing_else(module: str) -> None:
    source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
    assert "nexus.bootstrap import" in source or "from nexus.bootstrap" in source


def test_the_fetch_tool_never_reaches_the_api_itself_and_a_bad_own_address_is_named(
    tmp_path: Path,
) -> None:
    graph = bootstrap(_embedded(tmp_path, own_addresses=["flower:5555"]))
    hosts = {(own.host, own.port) for own in graph.own_addresses}
    networks = {(str(own.network), own.port) for own in graph.own_addresses if own.network}
    assert ("flower", 5555) in hosts and ("127.0.0.1/32", 8000) in networks  # NEXUS_API_URL
    with pytest.raises(ValueError, match=r"NEXUS_OWN_ADDRESSES: 'http://x/'"):
        bootstrap(_embedded(tmp_path, own_addresses=["http://x/"])).own_addresses  # noqa: B018


def test_a_workers_message_path_is_built_before_its_first_message(tmp_path: Path) -> None:
    # The first message after a worker (or a pool process) starts does not wait ~250 ms
    # for the router, the session runner, the turn service and the senders to be built.
    graph = bootstrap_worker(_embedded(tmp_path))
    assert {"router", "session_runner", "turns", "inline_replies", "senders"} <= set(vars(graph))
    assert graph.database._engine is None  # built, not connected (invariant 8)
