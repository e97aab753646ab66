"""`nexus dev` says it is running only once it listens: a server slow to start (its app's
start-up takes a while) is reachable by the time the line is printed."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn

from nexus.cli.dev import announcing_server
from tests.support import free_port


async def _slow_to_start(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app whose start-up takes 0.5 s, and which answers every request with 204."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await asyncio.sleep(0.5)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    else:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def test_the_banner_comes_once_the_port_takes_connections() -> None:
    port = free_port()
    config = uvicorn.Config(_slow_to_start, host="127.0.0.1", port=port, log_config=None)
    connectable: list[bool] = []

    def announce() -> None:
        # Where a person or a script told "running at" would connect, at that moment.
        with socket.socket() as probe:
            connectable.append(probe.connect_ex(("127.0.0.1", port)) == 0)
        server.should_exit = True

    server = announcing_server(config, announce)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert connectable == [True]
