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
"""

from __future__ import annotations

import math
from inspect import signature
from typing import Any

from sqlalchemy import Engine, event

# libpq takes whole seconds for these, and treats a connect_timeout below 2 as 2. A
# connection is made in milliseconds: one that takes ten seconds will not be made.
_MIN_CONNECT_S = 2
_MAX_CONNECT_S = 10
KEEPALIVE_PROBES = 3


def connect_args(timeout_s: float) -> dict[str, Any]:
    """libpq's parameters for a connection that gives up on a dead link after `timeout_s`."""
    whole = max(1, math.ceil(timeout_s))
    return {
        "connect_timeout": max(_MIN_CONNECT_S, min(whole, _MAX_CONNECT_S)),
        "keepalives": 1,
        "keepalives_idle": max(1, math.ceil(timeout_s / 2)),
        "keepalives_interval": max(1, math.ceil(timeout_s / (2 * KEEPALIVE_PROBES))),
        "keepalives_count": KEEPALIVE_PROBES,
        "tcp_user_timeout": int(timeout_s * 1000),
    }


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
