"""The pipeline's floor: a bare Celery sketch of Nexus's hops, with Nexus's own settings.

publish `bare.route` → router task → `bare.session` → session task: a Redis lock, then one
transaction of SELECT … FOR UPDATE, INSERT turn, INSERT 2 messages, UPDATE pointer
(`bench.ledger.bare_turn`). No HTTP, no event row, no identity, policy, queue or model.
`bare.ping` is the bare round trip the latency benchmark compares with.

Run as its own worker: `celery -A bench.bare_app worker` with the same flags as Nexus's.
Configured from the same NEXUS_* environment (broker, prefix, database) as a Nexus worker.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from celery import Celery
from sqlalchemy import Engine, create_engine, text

from bench.ledger import bare_turn
from nexus.adapters.celery_broker import create_celery
from nexus.settings import Settings

settings = Settings()


def create_bare(settings: Settings) -> Celery:
    """A Celery app with every setting Nexus's factory sets (acks_late, reject on worker
    lost, prefetch 1, visibility timeout, key prefix, task events…), and our task routes."""
    nexus = create_celery(settings)
    # The factory's own settings, whatever they are now, less what names Nexus's tasks.
    configured = {
        key: value
        for key, value in nexus._preconf.items()
        if key not in ("include", "deprecated_settings", "broker_url", "task_routes")
    }
    app = Celery("bench-bare", broker=settings.broker_url)
    app.conf.update(
        configured,
        task_routes={
            "bare.route": {"queue": "events"},
            "bare.ping": {"queue": "events"},
            "bare.session": {"queue": "sessions"},
        },
        # Only `bare.ping` keeps a result (ignore_result=False on it): `.get()` needs one.
        result_backend=settings.redis_url,
        result_backend_transport_options={"global_keyprefix": settings.broker_prefix or ""},
        result_expires=300,
    )
    return app


app = create_bare(settings)
_local: dict[str, Any] = {}
_lock = threading.Lock()


def engine() -> Engine:
    # Built on first use, so after the prefork fork, like Nexus's own.
    with _lock:
        if "engine" not in _local:
            _local["engine"] = create_engine(
                settings.database_url, pool_size=settings.db_pool_size, max_overflow=0
            )
        return _local["engine"]  # type: ignore[no-any-return]


def redis_client() -> redis.Redis:
    with _lock:
        if "redis" not in _local:
            _local["redis"] = redis.Redis.from_url(settings.redis_url or "")
        return _local["redis"]  # type: ignore[no-any-return]


def _session_of(sender: str) -> str:
    """The session for a sender: one lookup per sender per process, then memory."""
    sessions: dict[str, str] = _local.setdefault("sessions", {})
    if sender not in sessions:
        with engine().connect() as connection:
            found = connection.execute(
                text("SELECT id FROM sessions WHERE label = :label"), {"label": f"bare:{sender}"}
            ).scalar_one()
        sessions[sender] = str(found)
    return sessions[sender]


@app.task(name="bare.route")
def route(sender: str, said: str) -> None:
    app.send_task("bare.session", args=[_session_of(sender), said])


@app.task(name="bare.session")
def session(session_id: str, said: str) -> None:
    prefix = settings.broker_prefix or ""
    lock = redis_client().lock(
        f"{prefix}bare-lock:{session_id}", timeout=30, sleep=0.002, blocking_timeout=60
    )
    with lock, engine().begin() as connection:
        bare_turn(connection, session_id, said, f"you said: {said}")


@app.task(name="bare.ping", ignore_result=False)
def ping() -> str:
    return "pong"
