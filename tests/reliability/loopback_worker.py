"""The real worker app on a resolver that answers every host name with 127.0.0.1:
`celery -A tests.reliability.loopback_worker worker`.

A scenario may then have the model name any host (`api.github.com`,
`collector.attacker.example`) and everything the worker would send there lands on the
machine's own loopback, where the scenario listens: nothing leaves the machine even if a
check under test were broken. Addresses (the Postgres, Redis and model URLs, an address the
tool pinned) resolve to themselves, as with the system resolver.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from workers.main import app

__all__ = ["app"]
LOOPBACK = "127.0.0.1"
_system_getaddrinfo = socket.getaddrinfo


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _loopback_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    if isinstance(name, str) and not _is_address(name):
        host = LOOPBACK
    return _system_getaddrinfo(host, port, *args, **kwargs)


socket.getaddrinfo = _loopback_getaddrinfo
