"""The partition scenarios' TCP proxy (tests/reliability/links.py) on loopback: it forwards,
holds while cut, resets when told, heals, and delays each direction."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.reliability.links import Link


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A TCP echo server on loopback."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # a reset ends it
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[:2]
    stop.set()
    thread.join()
    server.close()


def _client(link: Link, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", link.port), timeout=timeout)


def _round_trip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def test_forwards_both_ways(echo: tuple[str, int]) -> None:
    with Link(echo) as link, _client(link) as sock:
        assert _round_trip(sock, b"ping") == b"ping"
        assert link.connections == 1


def test_a_cut_holds_the_connection_open_with_nothing_flowing_until_healed(
    echo: tuple[str, int],
) -> None:
    with Link(echo) as link, _client(link, timeout=0.3) as sock:
        assert _round_trip(sock, b"before") == b"before"
        link.cut()
        sock.sendall(b"during")
        with pytest.raises(TimeoutError):  # no answer, and no reset either
            sock.recv(4096)
        link.heal()
        sock.settimeout(2.0)
        assert sock.recv(4096) == b"during"  # held, then delivered in order
        assert _round_trip(sock, b"after") == b"after"


def test_a_new_connection_during_a_cut_waits_for_the_heal(echo: tuple[str, int]) -> None:
    with Link(echo) as link:
        link.cut()
        with _client(link, timeout=0.3) as sock:
            sock.sendall(b"hello")
            with pytest.raises(TimeoutError):
                sock.recv(4096)
            link.heal()
            sock.settimeout(2.0)
            assert sock.recv(4096) == b"hello"


def _reset_seen(connect: Callable[[], socket.socket], data: bytes) -> bool:
    """Whether a connection made by `connect` is reset (or closed) by its first exchanges."""
    try:
        with connect() as sock:
            for _ in range(10):  # the reset may land after a first send
                sock.sendall(data)
                if not sock.recv(4096):
                    return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    return False


def test_a_resetting_cut_resets_open_and_new_connections(echo: tuple[str, int]) -> None:
    with Link(echo) as link:
        sock = _client(link)
        assert _round_trip(sock, b"x") == b"x"
        link.cut(reset=True)
        assert _reset_seen(lambda: sock, b"y")
        assert _reset_seen(lambda: _client(link), b"z")
        link.heal()
        with _client(link) as healed:
            assert _round_trip(healed, b"healed") == b"healed"


def test_delay_is_per_direction(echo: tuple[str, int]) -> None:
    with Link(echo) as link, _client(link) as sock:
        link.delay(up_ms=150, down_ms=100)
        started = time.monotonic()
        assert _round_trip(sock, b"slow") == b"slow"
        assert time.monotonic() - started >= 0.25
        link.delay()
        link.loss(1.0, retransmit_ms=120)  # every chunk stalls once each way
        held = link.held
        started = time.monotonic()
        assert _round_trip(sock, b"lossy") == b"lossy"
        assert time.monotonic() - started >= 0.24
        assert link.held - held >= 2 and link.chunks >= link.held  # counted, each way
        with pytest.raises(ValueError, match="between 0 and 1"):
            link.loss(1.5)
