"""Bounds on a Postgres round trip, so that a process notices a dead link in bounded time.

Without them a statement sent down a link that went silent waits as long as TCP lets it:
about 15 minutes for unacknowledged data, two hours for an idle connection, and for ever
behind a proxy or balancer that keeps the TCP connection alive but forwards nothing. A turn
stuck so holds its session's lease, which its keep-alive (on Redis) goes on extending, and
no other worker may take the session over (docs/runtime.md, "A worker cut from Postgres").

Every connection gets `connect_timeout`, TCP keep-alives and `tcp_user_timeout` (libpq's, on
either driver). On psycopg 3 every round trip on an open connection (a statement, a fetch,
a commit) is bounded as well: one that gets no answer in time ends the connection, and
SQLAlchemy, seeing it closed, drops the pool's others, so the next checkout connects anew.

The server is told the same bound (`server_options`, in libpq's `options`, and two newer
settings once connected: `tell_the_server`), so that it gives up on a client that vanished:
a transaction the client left idle ends, releasing its row locks for whoever takes the
session over, rather than when Postgres's own keep-alives notice (two hours by default).
Nothing bounds how long a statement may run: a long legitimate query is left alone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from inspect import signature
from typing import Any

import structlog
from sqlalchemy import Engine, event

log = structlog.get_logger(__name__)

# libpq takes whole seconds for these, and treats a connect_timeout below 2 as 2. A
# connection is made in milliseconds: one that takes ten seconds will not be made.
_MIN_CONNECT_S = 2
_MAX_CONNECT_S = 10
KEEPALIVE_PROBES = 3
# libpq's server versions (140005 is 14.5) from which the newer settings are known.
_PG12 = 120_000
_PG14 = 140_000


def connect_args(timeout_s: float, *, options: str | None = None) -> dict[str, Any]:
    """libpq's parameters for a connection that gives up on a dead link after `timeout_s`,
    and whose server gives up on it as well. `options`: the user's own (`given_options`),
    kept after the server's bounds, so that a setting given there wins."""
    whole = max(1, math.ceil(timeout_s))
    idle, interval = _keepalive_times(timeout_s)
    return {
        "connect_timeout": max(_MIN_CONNECT_S, min(whole, _MAX_CONNECT_S)),
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": interval,
        "keepalives_count": KEEPALIVE_PROBES,
        "tcp_user_timeout": _ms(timeout_s),
        "options": merge_options(server_options(timeout_s), options),
    }


def _keepalive_times(timeout_s: float) -> tuple[int, int]:
    """Seconds idle before the first probe, and between probes: a dead peer is noticed
    within `timeout_s` (idle + interval * KEEPALIVE_PROBES)."""
    return (
        max(1, math.ceil(timeout_s / 2)),
        max(1, math.ceil(timeout_s / (2 * KEEPALIVE_PROBES))),
    )


def _ms(timeout_s: float) -> int:
    return max(1, int(timeout_s * 1000))


def server_settings(timeout_s: float) -> dict[str, int]:
    """The server's side of the bound, each known to every Postgres since 9.6 (a setting a
    server does not know, sent in `options`, would refuse the connection)."""
    idle, interval = _keepalive_times(timeout_s)
    return {
        # A transaction the client leaves idle longer than the bound is ended, its locks
        # released. Nexus sends a unit of work's statements one after another, never
        # waiting on anything else in between (a model call, a send) inside a transaction.
        "idle_in_transaction_session_timeout": _ms(timeout_s),
        # The server's own probes of a silent client (its default: two hours idle).
        "tcp_keepalives_idle": idle,
        "tcp_keepalives_interval": interval,
        "tcp_keepalives_count": KEEPALIVE_PROBES,
    }


def later_settings(timeout_s: float, server_version: int) -> dict[str, int]:
    """The server's side of the bound that newer servers have, for a server of
    `server_version` (libpq's number), set once connected."""
    settings: dict[str, int] = {}
    if server_version >= _PG12:
        # Data the server sent and the client never acknowledged (a result on its way to a
        # vanished client) ends the connection, where keep-alives do not probe.
        settings["tcp_user_timeout"] = _ms(timeout_s)
    if server_version >= _PG14:
        # A statement running for a client whose connection is gone (reset, or given up
        # by the keep-alives) is cancelled at the next check, rather than at its end.
        settings["client_connection_check_interval"] = _keepalive_times(timeout_s)[1] * 1000
    return settings


def server_options(timeout_s: float) -> str:
    """`server_settings` as libpq's `options` (`-c name=value`, on either driver)."""
    return " ".join(f"-c {name}={value}" for name, value in server_settings(timeout_s).items())


def merge_options(ours: str, theirs: str | None) -> str:
    """Ours, then the user's: Postgres applies them in order, so the user's own setting of
    the same name (`-c idle_in_transaction_session_timeout=0`) wins."""
    theirs = (theirs or "").strip()
    return f"{ours} {theirs}" if theirs else ours


def given_options(query: Mapping[str, str | tuple[str, ...]]) -> str | None:
    """The user's libpq `options`: the URL's (`?options=-c%20search_path%3Dnexus`), or else
    PGOPTIONS, which libpq reads only when the connection names no `options` (ours would
    hide it)."""
    given = query.get("options")
    if given is None:
        return os.environ.get("PGOPTIONS")
    return given if isinstance(given, str) else " ".join(given)


def named_settings(options: str | None) -> set[str]:
    """The settings libpq `options` set (`-c name=value`, `-cname=value`, `--name=value`)."""
    words = (options or "").split()
    named: set[str] = set()
    for at, word in enumerate(words):
        if word == "-c" and at + 1 < len(words):
            word = words[at + 1]
        elif word.startswith(("-c", "--")):
            word = word[2:]
        else:
            continue
        name, equals, _ = word.partition("=")
        if equals:
            named.add(name.replace("-", "_").lower())
    return named


def tell_the_server(engine: Engine, timeout_s: float, *, options: str | None = None) -> None:
    """Set `later_settings` on each new connection of `engine` (one statement each), but
    those the user's `options` set, which stand. A server that refuses one keeps its
    default, and is not asked again: a platform without the connection check
    (client_connection_check_interval, Linux's alone) refuses it."""
    refused = named_settings(options)
    errors: tuple[type[Exception], ...] = (
        engine.dialect.loaded_dbapi.ProgrammingError,
        engine.dialect.loaded_dbapi.DataError,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        settings = later_settings(timeout_s, _server_version(dbapi_connection))
        wanted = {name: value for name, value in settings.items() if name not in refused}
        if not wanted:
            return
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True  # a SET on its own: no BEGIN, no COMMIT
        try:
            cursor = dbapi_connection.cursor()
            try:
                for name, value in wanted.items():
                    try:
                        cursor.execute(f"SET {name} = {int(value)}")
                    except errors as error:
                        refused.add(name)
                        log.info("database_setting_refused", setting=name, error=str(error))
            finally:
                cursor.close()
        finally:
            dbapi_connection.autocommit = autocommit


def _server_version(dbapi_connection: Any) -> int:
    info = getattr(dbapi_connection, "info", None)  # psycopg 3; psycopg2 has it on the connection
    return int(getattr(info, "server_version", None) or dbapi_connection.server_version)


def bound_round_trips(engine: Engine, timeout_s: float) -> None:
    """Connect `engine` (psycopg 3) through a connection class whose every round trip gives
    up after `timeout_s` with an OperationalError, the connection closed. A psycopg whose
    waits take no bound (before 3.3) is left as it is: libpq's parameters still apply."""
    connection_class = _deadline_connection(timeout_s)
    if connection_class is None:
        return

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        return connection_class.connect(*cargs, **cparams)


def _deadline_connection(timeout_s: float) -> Any:
    import psycopg
    from psycopg import errors

    wait_timeout: type[Exception] | None = getattr(errors, "_WaitTimeout", None)
    if wait_timeout is None or "timeout" not in signature(psycopg.Connection.wait).parameters:
        return None
    expired: type[Exception] = wait_timeout

    class DeadlineConnection(psycopg.Connection[Any]):
        """A psycopg connection whose waits for the server end after `timeout_s`, unless
        the caller gives a bound of its own (LISTEN's `notifies`)."""

        def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
            if timeout is not None:
                return super().wait(gen, interval=interval, timeout=timeout)
            try:
                return super().wait(gen, interval=interval, timeout=timeout_s)
            except expired as error:
                # The server's answer may still be on its way: the connection is in an
                # unknown state, and is given up (SQLAlchemy sees it closed: a disconnect).
                self.close()
                raise psycopg.OperationalError(
                    f"no answer from the database in {timeout_s:g} s: connection given up"
                ) from error

    return DeadlineConnection
