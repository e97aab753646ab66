"""Open SSE streams against the rest of the API: `nexus api` with 500 streams held open
(waiting, as most streams are), and the p50/p99 of /healthz and a REST route
(`GET /v1/sessions/{label}`) with them open, beside the same with none open in the same
run. The target is absolute as well: p99 under 50 ms with the streams open.

Rounds alternate (none, open, none, open). After each open round one event is published
to every stream's session, and every stream must deliver it: the streams measured are
live, not merely connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import threading
import time
from typing import Any

import httpx
import redis

from bench import harness
from bench.latency import percentiles
from bench.stacks import nexus_stack

TOKEN = "bench-streams-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TARGET_P99_MS = 50.0
STREAMS_PER_SESSION = 10


class Streams:
    """`count` SSE connections held open on an event loop of their own, each drained."""

    def __init__(self, port: int, labels: list[str], count: int) -> None:
        self._port, self._labels, self._count = port, labels, count
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered = 0  # streams that delivered the probe event

    def __enter__(self) -> Streams:
        self._thread.start()
        self._call(self._open())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _call(self, work: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=timeout)

    @property
    def open(self) -> int:
        return sum(not task.done() for task in self._tasks)

    async def _open(self) -> None:
        gate = asyncio.Semaphore(50)  # connect in waves, not 500 handshakes at once
        started: list[asyncio.Future[None]] = []
        for number in range(self._count):
            ready = self._loop.create_future()
            started.append(ready)
            label = self._labels[number % len(self._labels)]
            self._tasks.append(asyncio.create_task(self._hold(label, gate, ready)))
        await asyncio.gather(*started)

    async def _hold(self, label: str, gate: asyncio.Semaphore, ready: asyncio.Future[None]) -> None:
        try:
            async with gate:
                reader, writer = await asyncio.open_connection("127.0.0.1", self._port)
                request = (
                    f"GET /v1/sessions/{label}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
                )
                writer.write(request.encode())
                seen = b""
                while b"retry: " not in seen:
                    chunk = await reader.read(4096)
                    if not chunk:
                        raise ConnectionError(f"the stream closed at once: {seen[-300:]!r}")
                    seen += chunk
        except Exception as error:
            ready.set_exception(error)
            return
        ready.set_result(None)
        try:
            while chunk := await reader.read(4096):
                seen = seen[-200:] + chunk
                if b"event: bench.probe" in seen:
                    self.delivered += 1
                    seen = b""
        finally:
            writer.close()

    async def _close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _sample(http: httpx.Client, label: str, samples: int) -> tuple[list[float], list[float]]:
    """/healthz and the REST route, interleaved, one request at a time."""
    health: list[float] = []
    rest: list[float] = []
    for index in range(samples + 5):  # the first five warm up
        for path, headers, found in (
            ("/healthz", {}, health),
            (f"/v1/sessions/{label}", AUTH, rest),
        ):
            started = time.perf_counter()
            http.get(path, headers=headers).raise_for_status()
            if index >= 5:
                found.append((time.perf_counter() - started) * 1000)
        time.sleep(0.005)
    return health, rest


def _probe(prefix: str, session_ids: list[str]) -> None:
    """One event on every stream's session, written where the runtime writes them."""
    client = redis.Redis.from_url(harness.REDIS_URL)
    for session_id in session_ids:
        client.xadd(f"{prefix}stream:{session_id}", {"type": "bench.probe", "data": "{}"})
    client.close()


def _raise_open_files_limit() -> None:
    # The API holds a socket per stream and a Redis connection per waiting stream; the
    # processes started from here inherit the limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run(*, quick: bool, streams: int | None = None) -> dict[str, Any]:
    count, samples = (100, 60) if quick else (500, 300)
    count = streams or count
    _raise_open_files_limit()
    sessions = max(1, count // STREAMS_PER_SESSION)
    labels = [f"bench-streams-{number}" for number in range(sessions)]
    idle: dict[str, list[float]] = {"health": [], "rest": []}
    streaming: dict[str, list[float]] = {"health": [], "rest": []}
    held, live = [], []
    with (
        harness.scratch("streams") as work,
        nexus_stack(work, workers=0, api_tokens=TOKEN) as stack,
        httpx.Client(base_url=stack.api_url or "", timeout=30) as http,
    ):
        assert stack.api_url is not None and stack.api is not None
        port = int(stack.api_url.rsplit(":", 1)[1])
        ids = []
        for label in labels:
            made = http.post("/v1/sessions", json={"label": label}, headers=AUTH)
            made.raise_for_status()
            ids.append(made.json()["id"])
        for _ in range(2):  # none, open, none, open: a noisy spell hits both sides
            health, rest = _sample(http, labels[0], samples // 2)
            idle["health"] += health
            idle["rest"] += rest
            with Streams(port, labels, count) as held_open:
                health, rest = _sample(http, labels[0], samples // 2)
                streaming["health"] += health
                streaming["rest"] += rest
                held.append(held_open.open)
                _probe(stack.prefix, ids)
                with contextlib.suppress(TimeoutError):
                    harness.wait_for(lambda: held_open.delivered >= count, timeout=30, what="probe")
                live.append(held_open.delivered)
    health_idle, health_open = percentiles(idle["health"]), percentiles(streaming["health"])
    rest_idle, rest_open = percentiles(idle["rest"]), percentiles(streaming["rest"])
    return {
        "streams": count,
        "sessions": sessions,
        "samples": len(streaming["health"]),
        "streams_held": min(held),  # open when the round's samples were done
        "streams_live": min(live),  # of those, how many delivered the probe event
        "healthz_ms": {"none_open": health_idle, "streams_open": health_open},
        "rest_ms": {"none_open": rest_idle, "streams_open": rest_open},
        "healthz_p99_ratio": health_open["p99"] / health_idle["p99"],
        "rest_p99_ratio": rest_open["p99"] / rest_idle["p99"],
        "target_p99_ms": TARGET_P99_MS,
        "rest_route": "GET /v1/sessions/{label}",
    }


if __name__ == "__main__":
    import sys

    # `python -m bench.streams [--quick] [--streams N]`
    chosen = int(sys.argv[sys.argv.index("--streams") + 1]) if "--streams" in sys.argv else None
    print(json.dumps(run(quick="--quick" in sys.argv, streams=chosen), indent=2))
