"""The distributed processes: `nexus worker`, `nexus beat`, `nexus flower` (Celery's own
programs, started with Nexus's app and the settings that matter)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import typer
from rich.console import Console

from nexus.operations.preflight import worker_problems
from nexus.settings import Settings

errors = Console(stderr=True)
ALL_QUEUES = "events,sessions,delivery,hooks,timer"


def _celery(*args: str) -> None:
    """Replace this process with Celery (signals, exit codes and PID stay Celery's own)."""
    command = [sys.executable, "-m", "celery", *args]
    os.execv(sys.executable, command)  # noqa: S606 - our own interpreter, fixed arguments


def _maxmemory_policy(redis_url: str) -> str | None:
    import redis

    try:
        found = redis.Redis.from_url(redis_url, socket_timeout=5).config_get("maxmemory-policy")
    except redis.ResponseError:
        errors.print("[yellow]warning[/yellow]: Redis refuses CONFIG GET; cannot check eviction")
        return None
    except redis.RedisError as error:
        errors.print(f"[red]cannot reach Redis at {redis_url}[/red]: {error}")
        raise typer.Exit(1) from error
    value = found.get("maxmemory-policy") if isinstance(found, dict) else None
    return str(value) if value is not None else None


def worker(settings: Settings, queues: str, extra: list[str]) -> None:
    from nexus.adapters.celery_broker import visibility_timeout_s

    policy = _maxmemory_policy(settings.redis_url) if settings.redis_url else None
    problems = worker_problems(
        maxmemory_policy=policy,
        visibility_timeout_s=visibility_timeout_s(settings),
        turn_time_limit_s=settings.turn_time_limit_seconds,
    )
    if problems:
        for problem in problems:
            errors.print(f"[red]refusing to start[/red]: {problem}")
        raise typer.Exit(2)
    # -E: task events, so Flower shows every task with its name and arguments.
    _celery("-A", "workers.main", "worker", "-E", "-Q", queues, "--loglevel", "INFO", *extra)


def beat(extra: list[str]) -> None:
    # The schedule file only remembers when ticks last ran; the timer's watermark in the
    # ledger is what makes ticks exact, so a throwaway place is enough (and writable).
    schedule = Path(tempfile.gettempdir()) / "nexus-celerybeat-schedule"
    _celery("-A", "beat.main", "beat", "--loglevel", "INFO", "--schedule", str(schedule), *extra)


def flower(settings: Settings, address: str, port: int, extra: list[str]) -> None:
    options = [f"--address={address}", f"--port={port}"]
    if settings.flower_basic_auth is not None:
        # Through the environment, which Flower reads (FLOWER_<OPTION>): a command line is
        # world-readable in `ps` and /proc/<pid>/cmdline, the environment only to its owner.
        os.environ["FLOWER_BASIC_AUTH"] = settings.flower_basic_auth.get_secret_value()
    else:
        errors.print(
            "[yellow]warning[/yellow]: NEXUS_FLOWER_BASIC_AUTH is not set; Flower's pages and "
            "API are open to whoever reaches the port"
        )
        os.environ.setdefault("FLOWER_UNAUTHENTICATED_API", "true")
    _celery("-A", "workers.main", "flower", *options, *extra)
