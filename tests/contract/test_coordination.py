"""One contract for coordination, run against the in-process twin and real Redis."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

from nexus.engine.query import QueryMessage
from nexus.engine.stream_events import StreamEvent
from nexus.ledger.enums import MessageSource
from nexus.queueing.coordination import Coordination, Steer
from nexus.queueing.keepalive import KeepAlive
from nexus.queueing.running import RunningTurn


def test_a_lease_is_exclusive_until_released(coordination: Coordination) -> None:
    first = coordination.acquire("session:a", ttl_ms=5_000)
    assert first is not None
    assert coordination.acquire("session:a", ttl_ms=5_000) is None
    assert coordination.acquire("session:b", ttl_ms=5_000) is not None
    first.release()
    assert coordination.acquire("session:a", ttl_ms=5_000) is not None


def test_an_expired_lease_can_be_taken_and_the_old_holder_cannot_extend(
    coordination: Coordination,
) -> None:
    stale = coordination.acquire("session:x", ttl_ms=100)
    assert stale is not None
    time.sleep(0.25)
    fresh = coordination.acquire("session:x", ttl_ms=5_000)
    assert fresh is not None
    assert stale.extend() is False
    stale.release()  # must not free the new holder's lease
    assert coordination.acquire("session:x", ttl_ms=5_000) is None


def test_keep_alive_holds_a_lease_past_its_ttl(coordination: Coordination) -> None:
    lease = coordination.acquire("session:long", ttl_ms=300)
    assert lease is not None
    with KeepAlive(lease, ttl_ms=300) as alive:
        time.sleep(0.8)
        assert coordination.acquire("session:long", ttl_ms=300) is None
    assert not alive.lost


def test_a_lease_is_seen_as_held_until_released_or_lapsed(coordination: Coordination) -> None:
    name = f"session:{uuid.uuid4().hex}"
    assert coordination.lease_held(name) is False
    lease = coordination.acquire(name, 60_000)
    assert lease is not None and coordination.lease_held(name) is True
    lease.release()
    assert coordination.lease_held(name) is False
    assert coordination.acquire(name, 50) is not None
    time.sleep(0.12)  # its holder died: the lease lapses on its own
    assert coordination.lease_held(name) is False


def test_a_flag_is_raised_once_until_lowered_or_expired(coordination: Coordination) -> None:
    assert coordination.raise_flag("router", 60_000) is True
    assert coordination.raise_flag("router", 60_000) is False
    assert coordination.raise_flag("other", 60_000) is True
    coordination.lower_flag("router")
    assert coordination.raise_flag("router", 50) is True
    time.sleep(0.12)
    assert coordination.raise_flag("router", 60_000) is True  # the short one expired
    coordination.lower_flag("router")
    coordination.lower_flag("other")


def test_abort_flags_are_per_session_and_keep_the_highest_epoch(
    coordination: Coordination,
) -> None:
    assert coordination.abort_epoch("s1") is None
    coordination.request_abort("s1", epoch=4)
    assert coordination.abort_epoch("s1") == 4 and coordination.abort_epoch("s2") is None
    coordination.request_abort("s1", epoch=9)
    coordination.request_abort("s1", epoch=5)  # a late, lower ask never lowers it
    assert coordination.abort_epoch("s1") == 9


def test_steering_messages_are_taken_once_in_order(coordination: Coordination) -> None:
    first = QueryMessage(
        text="one",
        queue_item_id="q1",
        source=MessageSource.HUMAN,
        platform="telegram",
        sender_name="Ada",
        occurred_at=5,
        attachments=({"kind": "voice", "file_id": "AwAD", "duration": 5},),
    )
    coordination.steer("s1", first, epoch=3)
    coordination.steer("s1", QueryMessage(text="two", queue_item_id="q2"), epoch=4)
    second = Steer(4, QueryMessage(text="two", queue_item_id="q2"))
    assert coordination.steers_waiting("s1") == [Steer(3, first), second]
    taken = coordination.take_steering("s1")
    assert taken == [Steer(3, first), second]
    assert coordination.take_steering("s1") == []
    assert coordination.steers_waiting("s1") == []
    assert coordination.take_steering("s2") == []


def test_publishing_never_raises(coordination: Coordination) -> None:
    coordination.publish("s1", "message.delta", {"text": "hi"})


def test_the_stream_keeps_events_with_ids_for_a_reconnect(coordination: Coordination) -> None:
    start = coordination.stream_tail("s1")
    coordination.publish("s1", "session.started", {"turn": 1})
    coordination.publish("s1", "message.delta", {"text": "hel"})
    coordination.publish("s2", "message.delta", {"text": "other session"})
    coordination.publish("s1", "turn.committed", {"turn_id": "t1"})
    seen = coordination.read_stream("s1", start, block_ms=100)
    assert [(e.type, e.data) for e in seen] == [
        ("session.started", {"turn": 1}),
        ("message.delta", {"text": "hel"}),
        ("turn.committed", {"turn_id": "t1"}),
    ]
    # Reconnecting with the id of the first event replays exactly the rest, in order.
    replayed = coordination.read_stream("s1", seen[0].id, block_ms=100)
    assert [e.id for e in replayed] == [e.id for e in seen[1:]]
    assert coordination.stream_tail("s1") == seen[-1].id
    assert coordination.read_stream("s1", seen[-1].id, block_ms=50) == []  # waits, then none


def test_a_reader_waiting_on_the_stream_wakes_for_a_new_event(
    coordination: Coordination,
) -> None:
    start = coordination.stream_tail("s9")
    found: list[list[str]] = []
    reader = threading.Thread(
        target=lambda: found.append(
            [e.type for e in coordination.read_stream("s9", start, block_ms=5_000)]
        )
    )
    reader.start()
    time.sleep(0.2)
    began = time.monotonic()
    coordination.publish("s9", "session.started", {})
    reader.join(timeout=5)
    assert found == [["session.started"]] and time.monotonic() - began < 2


def test_several_events_publish_in_order_as_one(coordination: Coordination) -> None:
    start_a, start_b = coordination.stream_tail("pa"), coordination.stream_tail("pb")
    coordination.publish_many(
        [
            StreamEvent("pa", "message.created", {"message_id": "m1"}),
            StreamEvent("pb", "queue.item.queued", {"queue_item_id": "q1"}),
            StreamEvent("pa", "turn.committed", {"turn_id": "t1"}),
        ]
    )
    coordination.publish_many([])  # nothing to say costs nothing and raises nothing
    seen_a = coordination.read_stream("pa", start_a, block_ms=100)
    assert [(e.type, e.data) for e in seen_a] == [
        ("message.created", {"message_id": "m1"}),
        ("turn.committed", {"turn_id": "t1"}),
    ]
    assert len({e.id for e in seen_a}) == 2
    [other] = coordination.read_stream("pb", start_b, block_ms=100)
    assert (other.type, other.data) == ("queue.item.queued", {"queue_item_id": "q1"})


def test_an_async_read_replays_after_an_id_and_waits_for_the_next_event(
    coordination: Coordination,
) -> None:
    async def scenario() -> None:
        start = await coordination.stream_tail_async("as1")
        coordination.publish("as1", "session.started", {"turn": 1})
        coordination.publish("as2", "message.delta", {"text": "other session"})
        coordination.publish("as1", "message.delta", {"text": "hi"})
        seen = await coordination.read_stream_async("as1", start, block_ms=100)
        assert [(e.type, e.data) for e in seen] == [
            ("session.started", {"turn": 1}),
            ("message.delta", {"text": "hi"}),
        ]
        assert await coordination.read_stream_async("as1", seen[0].id, block_ms=100) == seen[1:]
        tail = await coordination.stream_tail_async("as1")
        assert tail == seen[-1].id
        began = time.monotonic()
        assert await coordination.read_stream_async("as1", tail, block_ms=200) == []
        assert time.monotonic() - began >= 0.15  # it waited, then found nothing
        # A publish from another thread (a worker's) wakes a waiting reader at once.
        reader = asyncio.create_task(coordination.read_stream_async("as1", tail, block_ms=5_000))
        await asyncio.sleep(0.2)
        began = time.monotonic()
        await asyncio.to_thread(coordination.publish, "as1", "turn.committed", {"turn_id": "t1"})
        [woken] = await reader
        assert woken.type == "turn.committed" and time.monotonic() - began < 2

    asyncio.run(scenario())


def test_many_async_readers_wait_without_a_thread_each_and_all_wake(
    coordination: Coordination,
) -> None:
    async def scenario() -> None:
        start = await coordination.stream_tail_async("fan")
        await coordination.read_stream_async("fan", start, block_ms=1)  # the client, warmed
        threads = threading.active_count()
        readers = [
            asyncio.create_task(coordination.read_stream_async("fan", start, block_ms=10_000))
            for _ in range(50)
        ]
        await asyncio.sleep(0.3)
        assert threading.active_count() == threads  # waiting costs no thread
        coordination.publish("fan", "session.started", {})
        found = await asyncio.gather(*readers)
        assert [[e.type for e in entries] for entries in found] == [["session.started"]] * 50

    asyncio.run(scenario())


def test_the_running_turn_follows_the_sessions_stream_while_its_lease_is_held(
    coordination: Coordination,
) -> None:
    started = {"inputs": 1, "turn_id": "t1", "worker": "host:42", "started_at": 1_000}
    assert coordination.running("s") is None
    lease = coordination.acquire("session:s", 30_000)
    assert lease is not None
    coordination.publish("s", "session.started", started)
    assert coordination.running("s") == RunningTurn("t1", "host:42", 1_000, "starting")
    coordination.publish_many(
        [
            StreamEvent("s", "step.started", {"call": 1}),
            StreamEvent("s", "message.delta", {"text": "hi"}),  # changes nothing here
            StreamEvent("s", "tool.started", {"id": "c1", "name": "search"}),
        ]
    )
    found = coordination.running("s")
    assert found is not None and (found.turn_id, found.step) == ("t1", "tool search")
    assert coordination.running("other") is None
    lease.release()  # a run that died: its record says nothing without the lease
    assert coordination.running("s") is None
    again = coordination.acquire("session:s", 30_000)
    assert again is not None
    coordination.publish("s", "session.completed", {"turn_id": "t1", "status": "committed"})
    assert coordination.running("s") is None
    coordination.publish("s", "session.started", started | {"turn_id": "t2"})
    found = coordination.running("s")
    assert found is not None and (found.turn_id, found.step) == ("t2", "starting")
    again.release()


def test_posted_events_land_in_order_and_follow_the_running_turn(
    coordination: Coordination,
) -> None:
    """A turn's first publish is posted like any other: the events land in order, and the
    running-turn record follows `session.started` as any publish's would."""
    lease = coordination.acquire("session:c1", 30_000)  # the run's: running() needs it
    assert lease is not None
    start = coordination.stream_tail("c1")
    coordination.post_many(
        [
            StreamEvent("c1", "session.started", {"turn_id": "t1", "worker": "w:1"}),
            StreamEvent("c1", "step.started", {"call": 1}),
        ],
    )
    seen = coordination.read_stream("c1", start, block_ms=100)
    assert [e.type for e in seen] == ["session.started", "step.started"]
    running = coordination.running("c1")
    assert running is not None and (running.turn_id, running.step) == ("t1", "model call 1")
    lease.release()


def test_what_a_thread_posted_is_applied_before_its_next_call_returns(
    coordination: Coordination,
) -> None:
    """A running turn posts its progress and goes on: the events land in order, and what it
    asks next (a look at its signals, the stream) sees them applied."""
    start = coordination.stream_tail("p1")
    coordination.post_many([StreamEvent("p1", "session.started", {"n": 1})])
    coordination.post_many([StreamEvent("p1", "step.generating", {"n": 2})])
    coordination.post_many([])  # nothing to say costs nothing
    assert coordination.abort_epoch("p1") is None
    coordination.post_many([StreamEvent("p1", "message.delta", {"n": 3})])
    coordination.settle()
    coordination.settle()  # nothing owed: nothing to wait for
    seen = coordination.read_stream("p1", start, block_ms=100)
    assert [(e.type, e.data["n"]) for e in seen] == [
        ("session.started", 1),
        ("step.generating", 2),
        ("message.delta", 3),
    ]
