"""What Nexus connects to: the database (and its migrations), Redis and the broker."""

from __future__ import annotations

import redis
from sqlalchemy import text
from sqlalchemy.engine import make_url

from nexus.db.database import DatabaseDriverMissing, build_engine
from nexus.db.migrate import current_revision, head_revision
from nexus.doctor.check import Check
from nexus.settings import Settings


def _safe_url(url: str) -> str:
    """The URL with any password hidden, fit for printing."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable URL>"


def check_database(settings: Settings) -> list[Check]:
    url = settings.database_url
    shown = _safe_url(url)
    try:
        engine = build_engine(url)
    except DatabaseDriverMissing as error:
        return [Check("database", "fail", f"{shown}: {error}", error.install)]
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        current, head = current_revision(engine), head_revision()
    except Exception as error:
        return [
            Check(
                "database",
                "fail",
                f"cannot connect to {shown}: {type(error).__name__}: {error}",
                "start the database or correct NEXUS_DATABASE_URL",
            )
        ]
    finally:
        engine.dispose()
    checks = [Check("database", "ok", f"connected to {shown}")]
    if current == head:
        checks.append(Check("migrations", "ok", f"at head ({head})"))
    else:
        checks.append(
            Check(
                "migrations",
                "fail",
                f"database is at {current or 'an empty schema'}, code expects {head}",
                "run: nexus db upgrade",
            )
        )
    return checks


def check_redis(settings: Settings) -> Check:
    if settings.redis_url is None:
        return Check("redis", "ok", "not configured: embedded, in-process coordination")
    shown = _safe_url(settings.redis_url)
    error = _ping(settings.redis_url)
    if error is not None:
        return Check(
            "redis",
            "fail",
            f"cannot reach {shown}: {type(error).__name__}: {error}",
            "start Redis or correct NEXUS_REDIS_URL (unset it for the embedded mode)",
        )
    return Check("redis", "ok", f"reachable at {shown}")


def check_broker(settings: Settings) -> Check:
    broker = settings.broker_url
    if broker.startswith("memory://"):
        return Check("broker", "ok", "in-process (memory://): workers run inside this process")
    if broker == settings.redis_url:
        return Check("broker", "ok", "Celery uses the Redis above")
    if broker.startswith(("redis://", "rediss://")):
        error = _ping(broker)
        if error is not None:
            return Check(
                "broker",
                "fail",
                f"cannot reach {_safe_url(broker)}: {error}",
                "start the broker or correct NEXUS_BROKER_URL",
            )
        return Check("broker", "ok", f"reachable at {_safe_url(broker)}")
    return Check("broker", "warn", f"{_safe_url(broker)} is not checked by doctor")


def _ping(url: str) -> Exception | None:
    """Why the Redis at `url` did not answer a ping, or None when it did."""
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except Exception as error:
        return error
    return None
