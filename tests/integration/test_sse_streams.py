"""SSE streams on a real uvicorn server: they stay open past Redis's socket timeout with
heartbeats, they hold no worker thread while they wait (so many of them leave the rest of
the API answering), and a reconnect by Last-Event-ID resumes with no gap and no duplicate."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread
import httpx
import pytest
import redis
import uvicorn

from nexus.api.app import create_app
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.queueing.coordination import Coordination
from nexus.queueing.stream_log import START
from nexus.settings import Settings
from tests.services import REDIS_URL
from tests.support import free_port, new_session
from tests.throwaway import throwaway_redis

AUTH = {"Authorization": "Bearer tok"}
# More open streams than the server's threadpool has threads (anyio's default is 40).
MANY_STREAMS = 60


@dataclass
class Served:
    base: str
    port: int
    graph: Nexus
    loop: asyncio.AbstractEventLoop

    def session_id(self, label: str) -> str:
        with self.graph.database.unit_of_work() as uow:
            session = new_session(uow.ledger, label)
            uow.commit()
        return session.id

    def threads_borrowed(self) -> int:
        """Worker threads the server's requests hold right now (its default threadpool)."""

        async def borrowed() -> int:
            return int(anyio.to_thread.current_default_thread_limiter().borrowed_tokens)

        return asyncio.run_coroutine_threadsafe(borrowed(), self.loop).result(timeout=5)


@contextmanager
def _serve(graph: Nexus) -> Iterator[Served]:
    port = free_port()
    config = uvicorn.Config(
        create_app(graph), host="127.0.0.1", port=port, log_level="error",
        timeout_graceful_shutdown=1,
    )  # fmt: skip
    server = uvicorn.Server(config)
    loops: list[asyncio.AbstractEventLoop] = []

    async def serve() -> None:
        loops.append(asyncio.get_running_loop())
        await server.serve()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield Served(f"http://127.0.0.1:{port}", port, graph, loops[0])
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def ledger(tmp_path: Path, sqlite_template: Path) -> Iterator[Database]:
    """A ledger on SQLite alone: what is tested here does not depend on the database."""
    shutil.copyfile(sqlite_template, tmp_path / "nexus.db")
    database = Database(f"sqlite:///{tmp_path / 'nexus.db'}")
    yield database
    database.close()


@pytest.fixture
def served(ledger: Database, coordination: Coordination) -> Iterator[Served]:
    graph = bootstrap(
        Settings(api_tokens="tok"),
        database=ledger,
        doorbell=RecordingDoorbell(),
        coordination=coordination,
    )
    with _serve(graph) as served:
        yield served


@pytest.fixture
def served_on_redis(ledger: Database) -> Iterator[Served]:
    """Coordination as `bootstrap` builds it from NEXUS_REDIS_URL (redis-py's own socket
    timeouts), under a key prefix of this test's."""
    prefix = f"nexus-test-{uuid.uuid4().hex[:8]}:"
    settings = Settings(api_tokens="tok", redis_url=REDIS_URL, broker_prefix=prefix)
    graph = bootstrap(settings, database=ledger, doorbell=RecordingDoorbell())
    with _serve(graph) as served:
        yield served
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


@dataclass
class Listener:
    """One SSE client on a thread of its own, keeping every line and when it came."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    stop_after: int | None = None  # events, then it hangs up
    lines: list[tuple[float, str]] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(10, read=40)) as client,
                client.stream("GET", self.url, headers={**AUTH, **self.headers}) as response,
            ):
                assert response.status_code == 200, response.read()
                for line in response.iter_lines():
                    self.lines.append((time.monotonic(), line))
                    if line == "" and len(self.events()) == self.stop_after:
                        return
        except BaseException as error:  # what ended it is the test's to see
            self.error = error
        finally:
            self.ended.set()

    def events(self) -> list[tuple[str, str]]:
        """(id, event name) of every event so far."""
        found, event_id = [], ""
        for _, line in self.lines:
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                found.append((event_id, line[7:]))
        return found

    def wait_for(self, what: str, check: Callable[[], object], timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert not self.ended.is_set(), (what, self.error, self.lines[-5:])
            assert time.monotonic() < deadline, (what, self.lines[-5:])
            time.sleep(0.02)

    def connected(self) -> None:
        self.wait_for("the retry line", lambda: any(line for _, line in self.lines))


@pytest.mark.slow
def test_a_quiet_stream_stays_open_past_the_socket_timeout_with_heartbeats(
    served_on_redis: Served,
) -> None:
    served = served_on_redis
    session_id = served.session_id("dm:quiet")
    listener = Listener(f"{served.base}/v1/sessions/dm:quiet/stream")
    listener.connected()
    opened = time.monotonic()
    time.sleep(20)  # four of redis-py's 5 s socket timeouts, and one 15 s heartbeat
    assert not listener.ended.is_set(), listener.error
    heartbeats = [at - opened for at, line in listener.lines if line == ": keep-alive"]
    assert len(heartbeats) >= 1 and 14 <= heartbeats[0] <= 17, heartbeats
    # Still live, not merely open: an event published now arrives.
    served.graph.coordination.publish(session_id, "session.started", {"inputs": 1})
    listener.wait_for("the event", lambda: listener.events())
    assert [name for _, name in listener.events()] == ["session.started"]


def test_many_open_streams_hold_no_worker_thread_and_the_api_still_answers(
    served: Served,
) -> None:
    session_id = served.session_id("dm:many")
    request = (
        b"GET /v1/sessions/dm:many/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer tok\r\nAccept: text/event-stream\r\n\r\n"
    )
    streams: list[socket.socket] = []
    try:
        for _ in range(MANY_STREAMS):
            stream = socket.create_connection(("127.0.0.1", served.port), timeout=10)
            stream.sendall(request)
            streams.append(stream)
        for stream in streams:
            _read_until(stream, b"retry: ")
        assert served.threads_borrowed() == 0  # every stream waits on the loop, not a thread
        health = httpx.get(f"{served.base}/healthz", timeout=10)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        rest = httpx.get(f"{served.base}/v1/sessions/dm:many", headers=AUTH, timeout=10)
        assert rest.status_code == 200 and rest.json()["label"] == "dm:many"
        served.graph.coordination.publish(session_id, "session.started", {"inputs": 1})
        for stream in streams:  # and every stream is live
            _read_until(stream, b"event: session.started")
    finally:
        for stream in streams:
            stream.close()


def _read_until(stream: socket.socket, marker: bytes) -> None:
    seen = b""
    while marker not in seen:
        chunk = stream.recv(4096)
        assert chunk, f"the stream closed before {marker!r}: {seen[-200:]!r}"
        seen += chunk


@pytest.mark.parametrize("resume_by", ["header", "query"])
def test_a_reconnect_by_last_event_id_has_no_gap_and_no_duplicate(
    served: Served, resume_by: str
) -> None:
    session_id = served.session_id("dm:resume")
    url = f"{served.base}/v1/sessions/dm:resume/stream"
    first = Listener(url, stop_after=2)  # the client drops after the second event
    first.connected()
    for number in range(5):
        served.graph.coordination.publish(session_id, "message.delta", {"n": number})
    assert first.ended.wait(10) and first.error is None
    last_seen = first.events()[-1][0]
    for number in range(5, 9):  # published while it is away
        served.graph.coordination.publish(session_id, "message.delta", {"n": number})
    ids = [
        entry.id for entry in served.graph.coordination.read_stream(session_id, START, block_ms=1)
    ]
    # An SSE id is the stream id, then the client's place in the ledger (`.{sequence}`).
    assert len(ids) == 9 and ids[1] == last_seen.partition(".")[0]
    if resume_by == "header":
        again = Listener(url, headers={"Last-Event-ID": last_seen})
    else:
        again = Listener(f"{url}?last_event_id={last_seen}")
    again.wait_for("the seven missed", lambda: len(again.events()) >= 7)
    # And what comes after the replay arrives once, after it.
    served.graph.coordination.publish(session_id, "turn.committed", {"turn_id": "t"})
    again.wait_for("the live one", lambda: len(again.events()) == 8)
    time.sleep(0.3)  # nothing further (a duplicate) trails in
    resumed = again.events()
    assert [event_id.partition(".")[0] for event_id, _ in resumed[:7]] == ids[2:]
    assert resumed[7][1] == "turn.committed" and len(resumed) == 8
    assert len({event_id for event_id, _ in resumed}) == 8


@pytest.mark.slow
def test_a_stream_ends_cleanly_when_redis_goes_away_and_a_new_one_is_503(
    ledger: Database, tmp_path: Path
) -> None:
    with throwaway_redis(tmp_path) as server:
        settings = Settings(api_tokens="tok", redis_url=server.url)
        graph = bootstrap(settings, database=ledger, doorbell=RecordingDoorbell())
        with _serve(graph) as served:
            served.session_id("dm:gone")
            url = f"{served.base}/v1/sessions/dm:gone/stream"
            listener = Listener(url)
            listener.connected()
            server.stop()
            # The response ends properly (the client then reconnects after `retry`), rather
            # than the connection being cut mid-body.
            assert listener.ended.wait(15)
            assert listener.error is None, listener.error
            answer = httpx.get(url, headers=AUTH, timeout=15)
            assert answer.status_code == 503 and answer.headers["Retry-After"] == "5"
            assert "unreachable" in answer.json()["error"]["message"]
