"""A userspace TCP proxy for partition scenarios: a process's link to Redis or Postgres goes
through it, and the test cuts, heals, slows or degrades that link while the process runs.

    with Link(("127.0.0.1", 6379)) as link:
        url = f"redis://127.0.0.1:{link.port}/0"   # give the process this address
        link.cut()              # a dead switch: connections stay open, no byte flows
        link.cut(reset=True)    # connections are reset (RST), new ones refused the same way
        link.heal()             # bytes flow again, held ones first, in order
        link.delay(up_ms=50, down_ms=200)   # per direction: client→target is "up"
        link.loss(0.1)          # a chunk is held back a retransmission time, 10 % of them

It runs on its own event loop in a thread of the test process. Loss on a TCP link is not
lost bytes (the kernel sends them again) but a stall: each chunk is delayed by
`retransmit_ms` with the given probability, order kept, which is what the endpoints see.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

CHUNK = 65_536


class _Pipe:
    """One direction of one connection: read, hold while cut, delay, write (in order)."""

    def __init__(self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 up: bool) -> None:  # fmt: skip
        self.link, self.reader, self.writer, self.up = link, reader, writer, up
        self.queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def read(self) -> None:
        try:
            while True:
                await self.link._flowing.wait()
                data = await self.reader.read(CHUNK)
                if not data:
                    break
                delay_ms = self.link._up_ms if self.up else self.link._down_ms
                self.link.chunks += 1
                if self.link._loss and self.link._random.random() < self.link._loss:
                    delay_ms += self.link.retransmit_ms
                    self.link.held += 1
                await self.queue.put((time.monotonic() + delay_ms / 1000, data))
        except (ConnectionError, OSError):
            pass
        await self.queue.put((0.0, b""))

    async def write(self) -> None:
        try:
            while True:
                at, data = await self.queue.get()
                if not data:
                    break
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self.link._flowing.wait()
                self.writer.write(data)
                await self.writer.drain()
            with contextlib.suppress(OSError):
                if self.writer.can_write_eof():
                    self.writer.write_eof()
        except (ConnectionError, OSError):
            pass


class Link:
    """A TCP proxy on 127.0.0.1 (an ephemeral port: `port`) forwarding to `target`."""

    def __init__(self, target: tuple[str, int], *, seed: int = 0) -> None:
        self.target = target
        self.retransmit_ms = 200.0
        self.port = 0
        self.connections = 0  # accepted so far
        self.chunks = 0  # read from either end so far
        self.held = 0  # of them, held back a retransmission time (`loss`)
        self._up_ms = 0.0
        self._down_ms = 0.0
        self._loss = 0.0
        self._reset = False
        self._random = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="link", daemon=True)
        self._flowing = asyncio.Event()
        self._open: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    # -- what a test says ------------------------------------------------------------------

    def cut(self, *, reset: bool = False) -> None:
        """Stop forwarding. By default connections stay open with nothing flowing (a dead
        switch: the endpoints learn of it only from their own timeouts); `reset`: every
        open connection is reset now, and new ones are reset as they arrive."""
        self._call(self._cut, reset)

    def heal(self) -> None:
        """Forward again: new connections go through, held bytes flow on in order."""
        self._call(self._heal)

    def delay(self, *, up_ms: float = 0, down_ms: float = 0) -> None:
        """Latency per direction from now on: up is client → target, down the answers."""
        self._up_ms, self._down_ms = float(up_ms), float(down_ms)

    def loss(self, probability: float, *, retransmit_ms: float = 200) -> None:
        """Hold back this share of chunks by `retransmit_ms` (TCP's answer to a lost
        segment), order kept."""
        if not 0 <= probability <= 1:
            raise ValueError(f"a loss probability is between 0 and 1, not {probability}")
        self._loss, self.retransmit_ms = probability, float(retransmit_ms)

    @property
    def is_cut(self) -> bool:
        return not self._flowing.is_set()

    # -- life --------------------------------------------------------------------------------

    def __enter__(self) -> Link:
        self._thread.start()
        self.port = self._call(self._start)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._call(self._stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _call(self, function: Callable[..., Any], *args: object) -> Any:
        """Run `function` on the link's loop and wait for what it returns."""

        async def run() -> Any:
            result = function(*args)
            if asyncio.iscoroutine(result):
                return await result
            return result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    async def _start(self) -> int:
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._open):
            writer.transport.abort()
        self._flowing.set()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def _cut(self, reset: bool) -> None:
        self._flowing.clear()
        self._reset = reset
        if reset:
            for writer in list(self._open):
                _reset(writer)

    def _heal(self) -> None:
        self._reset = False
        self._flowing.set()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self._reset:
            _reset(client_w)
            return
        # A dead switch answers nothing: the connection waits (here, for the heal) before
        # the target ever hears of it.
        await self._flowing.wait()
        try:
            target_r, target_w = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(client_w)
            return
        self._open.update((client_w, target_w))
        up, down = _Pipe(self, client_r, target_w, True), _Pipe(self, target_r, client_w, False)
        try:
            await asyncio.gather(up.read(), up.write(), down.read(), down.write())
        finally:
            for writer in (client_w, target_w):
                self._open.discard(writer)
                writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST rather than FIN (SO_LINGER 0), as a switch or firewall resets."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
