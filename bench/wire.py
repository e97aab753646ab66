"""Distance on loopback: a TCP proxy that delays every chunk, each direction on its own, so
processes on one machine talk to Postgres and Redis as if across a network.

    python -m bench.wire 127.0.0.1:5432 --up-ms 0.5 --down-ms 0.5   # prints its port

A chunk read at t is written at t + delay, in order, so the delay is latency, not
bandwidth: a pipelined client pays it once, not per chunk. The forwarding logic is the
one `tests/reliability/links.py` uses for its partitions, with threads instead of an event
loop: an event loop's timers wait in whole milliseconds (epoll), which would turn a
0.25 ms delay into 1 ms or more; a thread sleeps to the microsecond. Each proxy runs in a
process of its own (`proxy()`), so its work is not the benchmark process's GIL's.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

CHUNK = 65_536


def _pipe(source: socket.socket, target: socket.socket, delay_s: float) -> None:
    """One direction of one connection: read, then write each chunk `delay_s` after it was
    read, in order (a reader thread and a writer thread, so reads are never held up)."""
    chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def read() -> None:
        try:
            while data := source.recv(CHUNK):
                chunks.put((time.monotonic() + delay_s, data))
        except OSError:
            pass
        chunks.put((0.0, b""))

    def write() -> None:
        try:
            while True:
                at, data = chunks.get()
                if not data:
                    break
                wait = at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                target.sendall(data)
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
        except OSError:
            with contextlib.suppress(OSError):
                source.shutdown(socket.SHUT_RDWR)

    threading.Thread(target=read, daemon=True).start()
    threading.Thread(target=write, daemon=True).start()


def serve(target: tuple[str, int], *, up_ms: float, down_ms: float) -> None:
    """Forward 127.0.0.1:<ephemeral> to `target` forever; print the port, then serve."""
    # Short GIL turns: a writer whose sleep ended must not wait 5 ms behind a reader.
    sys.setswitchinterval(0.0001)
    listener = socket.create_server(("127.0.0.1", 0), backlog=512)
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(target)
        except OSError:
            client.close()
            continue
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _pipe(client, upstream, up_ms / 1000)
        _pipe(upstream, client, down_ms / 1000)


@contextlib.contextmanager
def proxy(target: tuple[str, int], *, rtt_ms: float) -> Iterator[int]:
    """A delaying proxy to `target` in a process of its own, half the round trip each way;
    yields its port on 127.0.0.1."""
    host, port = target
    half = f"{rtt_ms / 2:g}"
    args = [sys.executable, "-m", "bench.wire", f"{host}:{port}", "--up-ms", half]
    process = subprocess.Popen([*args, "--down-ms", half], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the delaying proxy to {host}:{port} did not start")
        yield int(line)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.wire", description=__doc__)
    parser.add_argument("target", help="host:port to forward to")
    parser.add_argument("--up-ms", type=float, default=0.0, help="client → target delay")
    parser.add_argument("--down-ms", type=float, default=0.0, help="target → client delay")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    serve((host, int(port)), up_ms=args.up_ms, down_ms=args.down_ms)


if __name__ == "__main__":
    main()
