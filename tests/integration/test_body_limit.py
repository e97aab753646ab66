"""A 5 MiB webhook body is refused with 413 by a real server without being held in memory."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.db import Database
from nexus.db.migrate import upgrade
from tests.support import free_port

FIVE_MIB = 5 * 1024 * 1024
CHUNK = 64 * 1024


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, int, str]]:
    url = f"sqlite:///{tmp_path / 'nexus.db'}"
    upgrade(url)
    port = free_port()
    environment = {**os.environ, "NEXUS_DATABASE_URL": url, "NEXUS_TELEGRAM_SECRET_TOKEN": "t"}
    environment.pop("NEXUS_REDIS_URL", None)
    log = (tmp_path / "api.log").open("wb")
    nexus = Path(sys.executable).with_name("nexus")
    process = subprocess.Popen([str(nexus), "api", "--port", str(port)], env=environment,
                               stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "api.log").read_text()) from None
                time.sleep(0.1)
        yield port, process.pid, url
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def _send(port: int, headers: str, chunked: bool) -> bytes:
    """Send up to 5 MiB the way a client would, stopping when the server answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(headers.encode())
        connection.settimeout(0.05)
        sent, answer = 0, b""
        while sent < FIVE_MIB and not answer:
            piece = b"x" * CHUNK
            try:
                connection.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            except OSError:
                break  # the server closed its side after answering
            sent += CHUNK
            with contextlib.suppress(TimeoutError):
                answer = connection.recv(4096)
        connection.settimeout(10)
        while b"\r\n\r\n" not in answer:
            more = connection.recv(4096)
            if not more:
                break
            answer += more
        return answer


@pytest.mark.slow
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_five_mib_is_refused_without_growing_the_server(
    server: tuple[int, int, str], chunked: bool
) -> None:
    port, pid, url = server
    before = _rss_kib(pid)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {FIVE_MIB}"
    headers = (
        "POST /v1/inbound/telegram HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"X-Telegram-Bot-Api-Secret-Token: t\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    )
    answer = _send(port, headers, chunked)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    grown = _rss_kib(pid) - before
    print(f"server RSS grew by {grown} KiB for a 5 MiB body ({'chunked' if chunked else 'sized'})")
    assert grown < FIVE_MIB // 1024 // 2, f"server memory grew by {grown} KiB"
    database = Database(url)
    with database.unit_of_work() as uow:
        assert uow.ledger.events.unprocessed(received_before=2**62) == []
    database.close()
