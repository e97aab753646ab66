"""`nexus dev`: the embedded mode — API, a Celery worker and the timer in one process.

SQLite under ./.nexus/, Celery's in-process `memory://` transport, in-process coordination
(one object shared by the API and the worker, so abort, steer and the SSE stream work), the
scripted model unless an API key is set. Nothing here is needed in the distributed mode.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from nexus.settings import Settings

TICK_SECONDS = 60.0
WORKER_THREADS = 4


@dataclass
class Embedded:
    """The running pieces, so a caller (or a test) can stop them."""

    worker: Any
    worker_thread: threading.Thread
    timer_stop: threading.Event

    def stop(self) -> None:
        self.timer_stop.set()
        with suppress(Exception):  # already stopping: nothing more to do
            self.worker.stop(in_sighandler=False)


def start_embedded(settings: Settings) -> tuple[Any, Embedded]:
    """Migrate, start the worker thread and the timer; returns the API app to serve."""
    from celery.worker import WorkController

    from nexus.adapters.celery_broker import QUEUES
    from nexus.api.app import create_app
    from nexus.bootstrap import bootstrap_worker
    from nexus.db.migrate import upgrade

    upgrade(settings.database_url)
    # One graph for the worker and the API: the API rings the worker's in-process broker
    # and shares its coordination, so abort, steer and the live stream work.
    nexus = bootstrap_worker(settings)
    if Path(settings.hooks_dir).is_dir():
        # One process on its own ledger: its hooks directory is the deployment's, so it is
        # registered as it starts (a distributed deployment runs `nexus hooks sync`).
        nexus.hook_runner.sync()
    celery_app = nexus.celery
    # The worker's pool threads find their graph through Celery's current app; without
    # this they fall back to Celery's default app and build a second graph, with its own
    # coordination: the API's router flag would never be lowered (an event arriving just
    # after another waited for the timer's tick) and the live stream would stay silent.
    celery_app.set_default()
    worker = WorkController(
        app=celery_app,
        hostname="nexus-dev@localhost",
        pool_cls="threads",
        concurrency=WORKER_THREADS,
        queues=list(QUEUES),
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        loglevel="WARNING",
    )
    worker_thread = threading.Thread(target=worker.start, name="nexus-worker", daemon=True)
    worker_thread.start()
    timer_stop = threading.Event()
    threading.Thread(
        target=_tick_every_minute, args=(celery_app, timer_stop), name="nexus-timer", daemon=True
    ).start()
    # No tokens needed from this machine; nobody else gets in.
    api = create_app(nexus, open_on_loopback=True)
    return api, Embedded(worker, worker_thread, timer_stop)


def _tick_every_minute(celery_app: Any, stop: threading.Event) -> None:
    """What `nexus beat` does in the distributed mode: ring the timer every 60 s."""
    while not stop.wait(TICK_SECONDS):
        celery_app.send_task("nexus.timer.tick")


def run_dev(
    settings: Settings, *, host: str, port: int, console: Console, verbose: bool = False
) -> None:
    import uvicorn

    from nexus.logs import configure_logging

    # A person at a terminal reads plain lines, unless NEXUS_LOG_FORMAT says otherwise.
    chosen = "log_format" in settings.model_fields_set
    configure_logging(
        settings if chosen else settings.model_copy(update={"log_format": "console"}),
        # A newcomer reads the banner, then warnings and the turns answered; `--verbose`
        # brings back the migrations, the broker and every task received and done.
        quiet=not verbose,
    )
    api, embedded = start_embedded(settings)

    def announce() -> None:
        for line in banner(settings, host=host, port=port):
            console.print(line, soft_wrap=True)  # a command cut in two cannot be pasted

    config = uvicorn.Config(api, host=host, port=port, log_level="warning", log_config=None)
    try:
        announcing_server(config, announce).run()
    finally:
        embedded.stop()


def announcing_server(config: Any, announce: Callable[[], None]) -> Any:
    """A uvicorn server that calls `announce` once it listens, not before: whoever is told
    "running at" (a person, a script waiting for the line) can connect at once."""
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                announce()

    return Announcing(config)


def banner(settings: Settings, *, host: str, port: int) -> list[str]:
    """What `nexus dev` prints once it serves: where, on what, and commands to try.

    `nexus send` finds the API through NEXUS_API_URL (default http://127.0.0.1:8000), so
    when this server is elsewhere the suggested command says so, and works as typed."""
    url = _reachable_url(host, port)
    model = settings.default_model
    prefix = "" if settings.api_url.rstrip("/") == url else f"NEXUS_API_URL={url} "
    return [
        f"[bold]Nexus[/bold] is running at [link={url}]{url}[/link] (API docs: {url}/docs)",
        f"  console: [link={url}/ui]{url}/ui[/link] (no token needed from this machine)",
        f"  ledger {settings.database_url} · model {model} · embedded worker and timer",
        "Try, in another terminal:",
        f'  {prefix}nexus send main "hello" --wait',
        f"  {prefix}nexus tree main",
        f"  curl -N {url}/v1/sessions/main/stream",
    ]


def _reachable_url(host: str, port: int) -> str:
    """Where a client on this machine reaches a server listening on `host`: a wildcard
    address is listened on, never connected to."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - compared, not bound
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
