"""The SSE stream on a real server: one turn's events in order, and a reconnect with
Last-Event-ID that replays exactly what was missed."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from nexus.adapters.scripted import Say
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.queueing.coordination import Coordination
from nexus.sessions.runner import SessionRunner
from nexus.settings import Settings
from tests.contract.engine_support import Rig, build_rig
from tests.support import FakeClock, served_app

AUTH = {"Authorization": "Bearer tok"}
Event = tuple[str, str]  # (id, event name)


@pytest.fixture
def served(
    database: Database, clock: FakeClock, coordination: Coordination
) -> Iterator[tuple[str, Rig]]:
    """A real uvicorn server whose engine publishes to the coordination the API reads."""
    rig = build_rig(database, clock)
    rig.turns.publisher = coordination
    app = create_app(
        bootstrap(
            Settings(api_tokens="tok"),
            database=database,
            doorbell=RecordingDoorbell(),
            coordination=coordination,
        )
    )
    with served_app(app, timeout_graceful_shutdown=1) as url:
        yield url, rig


def _listen(
    url: str,
    until: str,
    found: list[Event],
    headers: dict[str, str],
    connected: threading.Event | None = None,
) -> None:
    with (
        httpx.Client(timeout=20) as client,
        client.stream("GET", url, headers={**AUTH, **headers}) as response,
    ):
        assert response.status_code == 200
        if connected is not None:
            # The route fixes where the stream starts before it answers: from here on,
            # nothing published for the session is missed.
            connected.set()
        assert response.headers["content-type"].startswith("text/event-stream")
        event_id = name = ""
        for line in response.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                name = line[7:]
            elif line == "" and name:
                found.append((event_id, name))
                if name == until:
                    return
                name = ""


def test_a_turn_streams_in_order_and_a_reconnect_replays_the_rest(
    served: tuple[str, Rig],
) -> None:
    base, rig = served
    session = rig.session("dm:sse")
    stream = f"{base}/v1/sessions/dm:sse/stream"
    live: list[Event] = []
    connected = threading.Event()
    listener = threading.Thread(
        target=_listen, args=(stream, "session.completed", live, {}, connected)
    )
    listener.start()
    assert connected.wait(timeout=20)
    # Deltas are published at most every 50 ms: stream slower than that to see several.
    rig.model.chunk_delay_s = 0.06
    rig.model.push(Say("one two three four"))
    outcome = rig.say(session.id, "count for me")
    listener.join(timeout=20)
    assert outcome.status == "committed"
    names = [name for _, name in live]
    assert names[0] == "session.started"
    assert names.count("message.delta") >= 2
    committed = names.index("turn.committed")
    assert names.index("message.delta") < committed < names.index("session.completed")
    ids = [event_id for event_id, _ in live]
    assert len(set(ids)) == len(ids)  # every event has its own id

    # The client dropped after the first delta: reconnecting replays exactly the rest.
    first_delta = names.index("message.delta")
    replayed: list[Event] = []
    _listen(stream, "session.completed", replayed, {"Last-Event-ID": ids[first_delta]})
    assert replayed == live[first_delta + 1 :]


def test_a_stream_for_an_unknown_session_is_404(served: tuple[str, Rig]) -> None:
    base, _ = served
    answer = httpx.get(f"{base}/v1/sessions/nobody/stream", headers=AUTH, timeout=30)
    assert answer.status_code == 404 and "no session" in answer.json()["error"]["message"]


def test_a_sent_message_streams_its_queue_progress_and_message_events(
    served: tuple[str, Rig], coordination: Coordination, clock: FakeClock
) -> None:
    """POST …/messages, then the session's run: the SSE route carries the queue item's
    life, the model's progress and the messages the commit created."""
    base, rig = served
    session = rig.session("dm:sse-queue")
    stream = f"{base}/v1/sessions/dm:sse-queue/stream"
    live: list[Event] = []
    connected = threading.Event()
    listener = threading.Thread(
        target=_listen, args=(stream, "session.completed", live, {}, connected)
    )
    listener.start()
    assert connected.wait(timeout=20)
    sent = httpx.post(
        f"{base}/v1/sessions/dm:sse-queue/messages",
        json={"content": "what is new?", "mode": "queue"},
        headers=AUTH,
        timeout=10,
    )
    assert sent.status_code == 202, sent.text
    rig.model.push(Say("nothing much"))
    runner = SessionRunner(
        database=rig.database,
        turns=rig.turns,
        coordination=coordination,
        doorbell=RecordingDoorbell(),
        clock=clock,
    )
    assert runner.run(session.id).turns == 1
    listener.join(timeout=20)
    names = [name for _, name in live]
    for promised in (
        "queue.item.queued",
        "step.generating",
        "message.created",
        "queue.item.consumed",
        "turn.committed",
    ):
        assert promised in names, (promised, names)
    assert names.index("queue.item.queued") < names.index("session.started")
    assert names.count("message.created") == 2  # the question and the answer
