"""Posting on Redis: a running turn's publishes go out without waiting for their answers,
which the thread's next call reads. The answers are owed, not lost: an error in one comes
out of that call, and the connection it went out on is whole again afterwards."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
import redis

from nexus.adapters.redis_coordination import RedisCoordination
from nexus.engine.stream_events import StreamEvent
from tests.services import REDIS_URL
from tests.support import redis_coordination

pytestmark = pytest.mark.redis


@pytest.fixture
def coordination() -> Iterator[RedisCoordination]:
    with redis_coordination() as found:
        yield found


def _spoil_stream(coordination: RedisCoordination, session_id: str) -> None:
    # A plain string where the stream should be: XADD to it answers WRONGTYPE.
    coordination._redis.set(coordination._key("stream", session_id), "not a stream")


def test_a_post_returns_before_its_answer_and_the_next_call_raises_what_it_failed_with(
    coordination: RedisCoordination,
) -> None:
    _spoil_stream(coordination, "bad")
    coordination.post_many([StreamEvent("bad", "step.started", {"call": 1})])  # no wait
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        coordination.abort_epoch("bad")
    # Every answer was read: the next call is answered as itself, not with a stale answer.
    coordination.request_abort("bad", epoch=3)
    assert coordination.abort_epoch("bad") == 3
    assert coordination.stream_tail("good") == "0-0"


def test_an_error_midway_leaves_the_later_answers_read_and_the_later_events_out(
    coordination: RedisCoordination,
) -> None:
    _spoil_stream(coordination, "bad")
    start = coordination.stream_tail("good")
    coordination.post_many(
        [
            StreamEvent("bad", "step.started", {"call": 1}),
            StreamEvent("good", "step.started", {"call": 1}),
        ]
    )
    with pytest.raises(redis.ResponseError):
        coordination.settle()
    seen = coordination.read_stream("good", start, block_ms=100)
    assert [e.type for e in seen] == ["step.started"]
    coordination.settle()  # nothing left owed


def test_a_publish_waits_and_raises_at_once(coordination: RedisCoordination) -> None:
    _spoil_stream(coordination, "bad")
    with pytest.raises(redis.ResponseError):
        coordination.publish_many([StreamEvent("bad", "turn.committed", {"turn_id": "t"})])


def test_each_thread_settles_only_what_it_posted(coordination: RedisCoordination) -> None:
    _spoil_stream(coordination, "bad")
    coordination.post_many([StreamEvent("bad", "step.started", {"call": 1})])
    other: list[int | None] = []
    # Another thread's calls neither read this thread's answers nor trip on its error.
    worker = threading.Thread(target=lambda: other.append(coordination.abort_epoch("x")))
    worker.start()
    worker.join(timeout=5)
    assert other == [None]
    with pytest.raises(redis.ResponseError):
        coordination.settle()


def test_a_dropped_connection_is_not_reused_and_the_next_publish_lands(
    coordination: RedisCoordination,
) -> None:
    start = coordination.stream_tail("s")
    coordination.post_many([StreamEvent("s", "step.started", {"call": 1})])
    # Redis drops the connection the post went out on (as a restart would).
    host, port = coordination._posted.connection._sock.getsockname()[:2]
    admin = redis.Redis.from_url(REDIS_URL)
    admin.client_kill(f"{host}:{port}")
    admin.close()
    # The answer came before the drop, or the call that reads it says the connection
    # went; either way the dead connection is not handed out again, and the next works.
    with contextlib.suppress(redis.ConnectionError):
        coordination.settle()
    coordination.publish("s", "step.started", {"call": 2})
    assert [e.data["call"] for e in coordination.read_stream("s", start, block_ms=100)][-1] == 2
