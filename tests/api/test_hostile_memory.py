"""A real `nexus api` process does not grow when sent a huge body without a token: it answers
401 from the headers and discards what follows, instead of parsing 80 MB first."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nexus.db.migrate import upgrade
from tests.support import free_port, port_open

HOSTILE = 80 * 1024 * 1024
MiB = 1024 * 1024


@pytest.fixture
def api_process(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """`nexus api` on a loopback port, over a migrated SQLite ledger: (pid, port)."""
    database = f"sqlite:///{tmp_path / 'nexus.db'}"
    upgrade(database)
    port = free_port()
    environment = {
        **os.environ, "NEXUS_DATABASE_URL": database, "NEXUS_API_TOKENS": "tok",
        "NEXUS_LOG_LEVEL": "WARNING",
    }  # fmt: skip
    nexus = Path(sys.executable).parent / "nexus"
    process = subprocess.Popen(
        [str(nexus), "api", "--port", str(port)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_open(port):
            assert process.poll() is None, "nexus api exited"
            assert time.monotonic() < deadline, "nexus api did not start"
            time.sleep(0.1)
        yield process.pid, port
    finally:
        process.terminate()
        process.wait(timeout=10)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _post_huge(port: int, path: str, *, token: str | None, chunked: bool) -> bytes:
    """POST HOSTILE bytes as a hostile client would: all of it, whatever the server answers
    first; returns the server's answer."""
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Authorization: Bearer {token}\r\n" if token else ""
    head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {HOSTILE}\r\n"
    data = b"[" + b"0," * (MiB // 2 - 1) + b"0"
    chunk = f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data
    with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(f"{head}\r\n".encode())
        try:
            for _ in range(HOSTILE // len(data)):
                client.sendall(chunk)
            client.sendall(b"0\r\n\r\n" if chunked else b"")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may stop listening once it has answered
        return client.recv(4096)


@pytest.mark.parametrize(
    ("token", "chunked", "status"),
    [(None, False, b"401"), (None, True, b"401"), ("tok", False, b"413"), ("tok", True, b"413")],
    ids=["no-token", "no-token-chunked", "declared", "chunked"],
)
def test_an_80_mb_post_leaves_the_api_process_small(
    api_process: tuple[int, int], token: str | None, chunked: bool, status: bytes
) -> None:
    pid, port = api_process
    warm = httpx.post(f"http://127.0.0.1:{port}/v1/events", json={}, timeout=10)
    assert warm.status_code == 401
    before = _rss(pid)
    answer = _post_huge(port, "/v1/events", token=token, chunked=chunked)
    time.sleep(0.5)
    grown = _rss(pid) - before
    print(f"RSS before {before / MiB:.1f} MiB, growth {grown / MiB:.1f} MiB")
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    if status == b"401":
        assert b"www-authenticate: bearer" in answer.lower()
    assert grown < 16 * MiB, f"the API grew by {grown / MiB:.0f} MiB"
