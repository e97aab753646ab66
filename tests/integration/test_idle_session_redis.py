"""What an idle session leaves in Redis: 50 sessions answered to idle through the router and
the session runner on the real Redis coordination, then every key naming one of them. Each
must expire (nothing per session is kept for good), the SSE stream within the replay window
(a reconnect after it replays from the ledger), and what outlives the window must be at most
2 KB per session (docs/runtime.md, "What Redis holds for a session")."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from bench.idle import key_uses
from nexus.adapters.redis_coordination import RedisCoordination
from nexus.bootstrap import Nexus, bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.enums import QueueStatus
from nexus.queueing.stream_expiry import STREAM_REPLAY_WINDOW_S
from nexus.settings import Settings
from tests.support import redis_coordination

pytestmark = pytest.mark.redis

SESSIONS = 50
MESSAGES = 2  # each a turn of its own: the stream holds two turns' events
IDLE_BYTES = 2_048
_numbers = count(1)


@pytest.fixture
def graph(tmp_path: Path, sqlite_template: Path) -> Iterator[Nexus]:
    shutil.copyfile(sqlite_template, tmp_path / "nexus.db")
    database = Database(f"sqlite:///{tmp_path / 'nexus.db'}")
    (tmp_path / "hooks").mkdir()
    settings = Settings(
        hooks_dir=str(tmp_path / "hooks"),
        database_url=database.url,
        model="scripted",
        collect_window_ms=0,
    )
    with redis_coordination() as coordination:
        yield bootstrap(
            settings, database=database, doorbell=RecordingDoorbell(), coordination=coordination
        )
    database.close()


def _message(sender: int) -> NexusEvent:
    return NexusEvent(
        id=f"telegram:{next(_numbers)}",
        adapter="telegram",
        platform="telegram",
        sender=Author(id=str(sender), display_name=f"Person {sender}"),
        container=Container(kind="dm", id=str(sender)),
        text=f"hello from {sender}",
        occurred_at=0,
    )


def _answer_all(graph: Nexus) -> None:
    """Play the workers: route what arrived (one session's turn runs inline), then run every
    session rung, until nothing is rung."""
    bell = graph.doorbell
    assert isinstance(bell, RecordingDoorbell)
    graph.router.drain()
    while bell.sessions:
        graph.session_runner.run(bell.sessions.pop(0))


def _sessions_idle(graph: Nexus) -> list[str]:
    with graph.database.reading() as uow:
        ids = [s.id for s in uow.ledger.sessions.page(after_label=None, limit=SESSIONS * 2)]
        for session_id in ids:
            items = uow.ledger.queue.for_session(session_id)
            assert items and {i.status for i in items} == {QueueStatus.DONE}
    return ids


def test_an_idle_session_keeps_at_most_2_kb_in_redis_past_the_replay_window(
    graph: Nexus,
) -> None:
    for _ in range(MESSAGES):
        with graph.database.unit_of_work() as uow:
            ingest(uow, [_message(sender) for sender in range(SESSIONS)], graph.doorbell)
            uow.commit()
        _answer_all(graph)
    ids = _sessions_idle(graph)
    assert len(ids) == SESSIONS

    coordination = graph.coordination
    assert isinstance(coordination, RedisCoordination)
    keys = key_uses(coordination._redis, coordination._prefix, ids)
    outliving = 0  # bytes of the keys naming a session that outlive the replay window
    kinds: dict[str, list[int]] = {}
    for key in (k for k in keys if k.session is not None):
        kinds.setdefault(key.kind, []).append(key.ttl)
        assert key.ttl != -1, f"{key.kind} never expires"
        if key.ttl > STREAM_REPLAY_WINDOW_S:
            outliving += key.used
    assert outliving / SESSIONS <= IDLE_BYTES, (outliving / SESSIONS, sorted(kinds))
    # Every session's stream is there (a reconnect now is served from Redis), for the window.
    streams = kinds["stream:{session}"]
    assert len(streams) == SESSIONS and max(streams) <= STREAM_REPLAY_WINDOW_S, streams
