"""`nexus tail SESSION` against a real server, through a loopback proxy that can cut the
connection mid-stream: the command resumes with Last-Event-ID and prints every event once."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from nexus.bootstrap import Nexus
from nexus.ledger.records import NewSession
from tests.support import serving_cli

NEXUS = Path(sys.prefix) / "bin" / "nexus"


class CuttableProxy:
    """Forwards loopback TCP connections to `upstream`; `cut()` drops every open one, as a
    load balancer restarting or a network blip would."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.accepted = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.connections += [client, server]
                self.accepted += 1
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        with suppress(OSError):
            while chunk := source.recv(65536):
                target.sendall(chunk)
        for end in (source, target):
            with suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            dropped, self.connections = self.connections, []
        for end in dropped:
            with suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.cut()
        self.listener.close()


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Nexus]:
    with serving_cli(tmp_path, monkeypatch) as graph:
        yield graph


def _publish(server: Nexus, session_id: str, numbers: range) -> None:
    for number in numbers:
        server.coordination.publish(session_id, "note", {"n": number})


def test_tail_resumes_after_a_dropped_connection_without_a_gap_or_a_repeat(
    server: Nexus,
) -> None:
    with server.database.unit_of_work() as uow:
        persona = uow.ledger.agents.ensure("assistant")
        session = uow.ledger.sessions.ensure(NewSession(label="live", persona_id=persona.id))
        uow.commit()
    api = urlsplit(os.environ["NEXUS_API_URL"])
    proxy = CuttableProxy((api.hostname or "127.0.0.1", api.port or 80))
    environment = {**os.environ, "NEXUS_API_URL": f"http://127.0.0.1:{proxy.port}"}
    _publish(server, session.id, range(1, 4))
    tail = subprocess.Popen(
        [str(NEXUS), "tail", "live", "--after", "0-0", "--count", "6", "--json"],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    assert tail.stdout is not None

    def read() -> None:
        for line in tail.stdout or ():
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()

    def next_event() -> dict[str, Any]:
        try:  # a missed event would leave the command waiting: fail, not hang
            return dict(json.loads(lines.get(timeout=20)))
        except queue.Empty:
            raise AssertionError("no event within 20 s") from None

    try:
        seen = [next_event() for _ in range(3)]
        assert proxy.accepted == 1
        proxy.cut()  # mid-stream: the command is waiting for the next event
        _publish(server, session.id, range(4, 7))  # while it is disconnected
        seen += [next_event() for _ in range(3)]
        assert tail.wait(timeout=30) == 0, tail.stderr.read() if tail.stderr else ""
    finally:
        if tail.poll() is None:
            tail.kill()
        proxy.close()
    assert [event["data"]["n"] for event in seen] == [1, 2, 3, 4, 5, 6]
    assert len({event["id"] for event in seen}) == 6
    assert proxy.accepted == 2  # it reconnected once, after the last event it had seen
    assert tail.stderr is not None and "reconnecting" in tail.stderr.read()
