"""SSE replay when Redis has lost the stream: a reconnect with Last-Event-ID after the
session's stream key is deleted (a flush, an expiry) gets every kept event after that id from
the ledger, in order and once, then continues live — on Redis and on the in-process twin."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexus.adapters.redis_coordination import RedisCoordination
from nexus.adapters.scripted import CallTools, Say
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.queueing.coordination import Coordination, InProcessCoordination
from nexus.settings import Settings
from tests.contract.engine_support import (
    RecordingTool,
    Rig,
    build_rig,
    capabilities_with,
    registry_with,
)
from tests.integration.test_sse_streams import Listener, Served, _serve
from tests.support import FakeClock, redis_coordination


@pytest.fixture
def served(tmp_path: Path, sqlite_template: Path, coordination: Coordination) -> Iterator[Served]:
    shutil.copyfile(sqlite_template, tmp_path / "nexus.db")
    database = Database(f"sqlite:///{tmp_path / 'nexus.db'}")
    graph = bootstrap(
        Settings(api_tokens="tok"),
        database=database,
        doorbell=RecordingDoorbell(),
        coordination=coordination,
    )
    with _serve(graph) as served:
        yield served
    database.close()


def _lose_stream(coordination: Coordination, session_id: str) -> None:
    """What FLUSHDB does to one session: its stream is gone."""
    if isinstance(coordination, RedisCoordination):
        assert coordination._redis.delete(coordination._key("stream", session_id)) == 1
    else:
        assert isinstance(coordination, InProcessCoordination)
        coordination.log.drop(session_id)


@pytest.fixture
def rig(served: Served) -> Rig:
    rig = build_rig(served.graph.database, FakeClock())
    rig.turns.publisher = served.graph.coordination  # as a worker publishes
    return rig


def _kept(database: Database, session_id: str) -> list[tuple[int, str, str | None]]:
    with database.reading() as uow:
        rows = uow.ledger.session_events.page(session_id, limit=1000)
    return [(row.sequence, row.type, row.turn_id) for row in rows]


def test_a_reconnect_after_the_stream_is_lost_misses_nothing_kept(served: Served, rig: Rig) -> None:
    session = rig.session("dm:flushed")
    url = f"{served.base}/v1/sessions/dm:flushed/stream"
    watching = Listener(url)
    watching.connected()
    first = rig.say(session.id, "one")
    kept = _kept(served.graph.database, session.id)
    assert kept and {turn for _, _, turn in kept} == {first.turn_id}
    watching.wait_for("the first turn", lambda: len(watching.events()) == len(kept))
    live = watching.events()
    assert [kind for _, kind in live] == [kind for _, kind, _ in kept]
    last_seen = live[2][0]  # the client drops in the middle of the turn's events…
    second = rig.say(session.id, "two")  # …misses a whole turn…
    _lose_stream(served.graph.coordination, session.id)  # …and Redis loses all of it
    assert served.graph.coordination.stream_tail(session.id) == "0-0"

    again = Listener(url, headers={"Last-Event-ID": last_seen})
    kept = _kept(served.graph.database, session.id)
    missed = kept[3:]
    assert {turn for _, _, turn in missed} == {first.turn_id, second.turn_id}
    again.wait_for("the missed ones", lambda: len(again.events()) >= len(missed))
    assert [kind for _, kind in again.events()] == [kind for _, kind, _ in missed]
    # Then live, once each: a third turn's events, none of the replayed ones again.
    third = rig.say(session.id, "three")
    everything = _kept(served.graph.database, session.id)
    now_kept = [row for row in everything if row[2] == third.turn_id]
    again.wait_for("the live turn", lambda: len(again.events()) >= len(missed) + len(now_kept))
    resumed = again.events()
    assert [kind for _, kind in resumed] == [kind for _, kind, _ in everything[3:]]
    assert len({event_id for event_id, _ in resumed}) == len(resumed)

    # And a reconnect from a replayed event's id reads on from there (Redis lost it too).
    from_replayed = Listener(url, headers={"Last-Event-ID": resumed[1][0]})
    expected = everything[5:]
    from_replayed.wait_for("the rest", lambda: len(from_replayed.events()) >= len(expected))
    assert [kind for _, kind in from_replayed.events()] == [kind for _, kind, _ in expected]


def test_a_reconnect_redis_can_serve_is_served_from_redis_alone(served: Served, rig: Rig) -> None:
    """Nothing lost: the ids resolve in Redis, and the replay is what Redis kept, in order,
    ledger or not (events the ledger does not keep, like a queue's, come too)."""
    session = rig.session("dm:kept")
    url = f"{served.base}/v1/sessions/dm:kept/stream"
    watching = Listener(url, stop_after=2)
    watching.connected()
    rig.say(session.id, "one")
    assert watching.ended.wait(10)
    last_seen = watching.events()[-1][0]
    served.graph.coordination.publish(session.id, "queue.item.queued", {"queue_item_id": "q"})
    again = Listener(url, headers={"Last-Event-ID": last_seen})
    kept = _kept(served.graph.database, session.id)
    expected = [kind for _, kind, _ in kept[2:]] + ["queue.item.queued"]
    again.wait_for("the rest", lambda: len(again.events()) >= len(expected))
    assert [kind for _, kind in again.events()] == expected


def test_events_lost_while_a_turn_runs_are_sent_when_it_commits(served: Served) -> None:
    """The client drops early in a turn, Redis loses what the turn published meanwhile,
    and the client is back before the turn commits: the ledger does not have the turn yet,
    so the lost events come from it once the commit's report shows the gap — each once."""
    rig = build_rig(served.graph.database, FakeClock(), tools=[], granted=[])
    rig.turns.publisher = served.graph.coordination
    url = f"{served.base}/v1/sessions/dm:gap/stream"
    back: list[Listener] = []
    first = Listener(url, stop_after=2)

    def lose_and_reconnect() -> None:
        assert first.ended.wait(10)
        _lose_stream(served.graph.coordination, session.id)
        listener = Listener(url, headers={"Last-Event-ID": first.events()[-1][0]})
        listener.connected()
        back.append(listener)

    tool = RecordingTool("pause", on_call=lose_and_reconnect)
    rig.turns.tools = registry_with(tool)
    rig.turns.capabilities = capabilities_with(["pause"])
    session = rig.session("dm:gap", capabilities=["test_tools"])
    first.connected()
    rig.model.push(CallTools((("pause", {}),), text="Wait."), Say("Done."))
    outcome = rig.say(session.id, "go")
    kept = _kept(served.graph.database, session.id)
    assert {turn for _, _, turn in kept} == {outcome.turn_id}
    [again] = back
    again.wait_for("the rest of the turn", lambda: len(again.events()) >= len(kept) - 2)
    got = sorted(kind for _, kind in again.events())
    assert got == sorted(kind for _, kind, _ in kept[2:])
    assert [kind for _, kind in first.events()] == [kind for _, kind, _ in kept[:2]]


@pytest.mark.redis
def test_a_reconnect_after_the_replay_window_misses_nothing_kept(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """An idle session's stream expires a replay window after its last commit's report (one
    second here): a client that was away longer is served from the ledger, with no gap, and
    one that stayed connected through the expiry goes on live as before."""
    shutil.copyfile(sqlite_template, tmp_path / "nexus.db")
    database = Database(f"sqlite:///{tmp_path / 'nexus.db'}")
    with redis_coordination(replay_window_s=1) as coordination:
        graph = bootstrap(
            Settings(api_tokens="tok"),
            database=database,
            doorbell=RecordingDoorbell(),
            coordination=coordination,
        )
        with _serve(graph) as served:
            rig = build_rig(database, FakeClock())
            rig.turns.publisher = coordination
            session = rig.session("dm:windowed")
            url = f"{served.base}/v1/sessions/dm:windowed/stream"
            staying, leaving = Listener(url), Listener(url, stop_after=3)
            staying.connected()
            leaving.connected()
            rig.say(session.id, "one")
            assert leaving.ended.wait(10)
            rig.say(session.id, "two")  # the leaving client misses the rest of it all
            kept = _kept(database, session.id)
            staying.wait_for("both turns", lambda: len(staying.events()) == len(kept))
            stream = coordination._key("stream", session.id)
            assert 0 < coordination._redis.ttl(stream) <= 1  # idle: the window, not the hour
            _wait_until_gone(coordination, stream)

            again = Listener(url, headers={"Last-Event-ID": leaving.events()[-1][0]})
            missed = kept[3:]
            again.wait_for("the missed ones", lambda: len(again.events()) >= len(missed))
            assert [kind for _, kind in again.events()] == [kind for _, kind, _ in missed]
            # Then live, for both: a third turn on a stream Redis starts afresh.
            rig.say(session.id, "three")
            everything = _kept(database, session.id)
            for listener, first in ((again, 3), (staying, 0)):
                expected = [kind for _, kind, _ in everything[first:]]
                listener.wait_for("the third", lambda: len(listener.events()) >= len(expected))  # noqa: B023
                assert [kind for _, kind in listener.events()] == expected
                assert len({event_id for event_id, _ in listener.events()}) == len(expected)
    database.close()


def _wait_until_gone(coordination: RedisCoordination, key: str, timeout: float = 10) -> None:
    """Until Redis has expired `key` (EXISTS expires a key whose time is up as it asks)."""
    deadline = time.monotonic() + timeout
    while coordination._redis.exists(key):
        assert time.monotonic() < deadline, f"{key} did not expire"
        time.sleep(0.05)
