"""Dead letters on every backend: listed newest first a page at a time, replayed as a new
item (the dead one keeps its record), once; queue depths and the timer's last tick."""

from __future__ import annotations

import pytest

from nexus.arrival.replay import replay
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.enums import Disposition, QueueMode, QueueStatus, SessionStatus
from nexus.ledger.records import EventDraft, NewQueueItem
from nexus.ledger.repository import NotFound, SessionArchived
from tests.support import FakeClock, new_session


def _dead(database: Database, clock: FakeClock, label: str, text: str, *, event: bool) -> str:
    """An item of session `label` (created when new), dead-lettered."""
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve(label) or new_session(uow.ledger, label)
        event_id = None
        if event:
            event_id = f"telegram:{label}:{text}"
            uow.ledger.events.insert(
                EventDraft(
                    id=event_id,
                    adapter="telegram",
                    platform="telegram",
                    text=text,
                    container_kind="dm",
                    container_id="42",
                    occurred_at=1,
                    payload={"update_id": 7},
                ),
                disposition="queued",
            )
        item_id, _ = uow.ledger.queue.enqueue(
            NewQueueItem(
                session_id=session.id,
                event_id=event_id,
                mode=QueueMode.COLLECT,
                payload={} if event else {"text": text},
            )
        )
        clock.advance(10)
        uow.ledger.queue.dispose(
            [item_id],
            status=QueueStatus.DEAD,
            disposition=Disposition.DEAD_LETTERED,
            detail="after 3 attempts: boom",
        )
        uow.commit()
    return item_id


def test_dead_letters_page_newest_first_with_text_and_count(
    database: Database, clock: FakeClock
) -> None:
    first = _dead(database, clock, "a", "one", event=True)
    second = _dead(database, clock, "b", "two", event=False)
    third = _dead(database, clock, "a", "three", event=False)
    with database.unit_of_work() as uow:
        ledger = uow.ledger.dead_letters
        page = ledger.page(before=None, limit=2)
        rest = ledger.page(before=(page[-1].dead_at, page[-1].id), limit=2)
        assert ledger.count() == (3, 3)
    assert [d.id for d in page] == [third, second] and [d.id for d in rest] == [first]
    assert [(d.session, d.text) for d in [*page, *rest]] == [
        ("a", "three"),
        ("b", "two"),
        ("a", "one"),  # the event's text
    ]
    assert rest[0].detail == "after 3 attempts: boom" and rest[0].replayed_as is None


@pytest.mark.parametrize("from_event", [True, False], ids=["event", "payload"])
def test_a_replay_is_a_new_item_once_and_the_dead_one_stays_dead(
    database: Database, clock: FakeClock, from_event: bool
) -> None:
    dead_id = _dead(database, clock, "a", "hello", event=from_event)
    doorbell = RecordingDoorbell()
    with database.unit_of_work() as uow:
        done = replay(uow, dead_id, doorbell)
        assert doorbell.sessions == []  # only after the commit
        uow.commit()
    assert doorbell.sessions == [done.session_id] and done.created
    with database.unit_of_work() as uow:
        again = replay(uow, dead_id, doorbell)
        uow.commit()
        dead = uow.ledger.queue.get(dead_id)
        new = uow.ledger.queue.get(done.queue_item_id)
        listed = uow.ledger.dead_letters.get(dead_id)
        counted = uow.ledger.dead_letters.count()
        copy = uow.ledger.events.get(new.event_id) if new and new.event_id else None
        copied_payload = uow.ledger.events.payload_of(copy.id) if copy else None
    assert (again.queue_item_id, again.created) == (done.queue_item_id, False)
    assert dead is not None and (dead.status, dead.disposition) == (
        QueueStatus.DEAD,
        Disposition.DEAD_LETTERED,
    )
    assert new is not None and new.status == QueueStatus.QUEUED and new.mode == QueueMode.QUEUE
    assert new.payload["replay_of"] == dead_id
    assert listed is not None and listed.replayed_as == done.queue_item_id
    assert counted == (1, 0)
    if from_event:  # the copy keeps the reply's address and the platform's payload
        assert copy is not None and copy.id == f"replay:{dead_id}"
        assert (copy.adapter, copy.container_id, copy.text) == ("telegram", "42", "hello")
        assert copied_payload == {"update_id": 7}
    else:
        assert new.event_id is None and new.payload["text"] == "hello"


def test_replay_refuses_an_archived_session_and_an_item_that_is_not_dead(
    database: Database, clock: FakeClock
) -> None:
    dead_id = _dead(database, clock, "a", "hello", event=True)
    with database.unit_of_work() as uow:
        session = uow.ledger.sessions.resolve("a")
        assert session is not None
        uow.ledger.sessions.configure(session.id, {"status": SessionStatus.ARCHIVED})
        live, _ = uow.ledger.queue.enqueue(
            NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE, payload={"text": "x"})
        )
        uow.commit()
    doorbell = RecordingDoorbell()
    with database.unit_of_work() as uow:
        with pytest.raises(SessionArchived, match="cannot be replayed"):
            replay(uow, dead_id, doorbell)
        with pytest.raises(NotFound):
            replay(uow, live, doorbell)
        assert uow.ledger.dead_letters.count() == (1, 1)
    assert doorbell.sessions == []


def test_queue_depths_and_the_last_tick(database: Database, clock: FakeClock) -> None:
    with database.unit_of_work() as uow:
        assert uow.ledger.dead_letters.last_tick("default") is None
        busy, quiet = new_session(uow.ledger, "busy"), new_session(uow.ledger, "quiet")
        oldest = clock()
        for session, count in ((busy, 3), (quiet, 1)):
            for _ in range(count):
                uow.ledger.queue.enqueue(NewQueueItem(session_id=session.id, mode=QueueMode.QUEUE))
                clock.advance(5)
        uow.ledger.timer.lock_watermark("default")
        uow.ledger.timer.advance("default", 60_000)
        uow.commit()
    with database.unit_of_work() as uow:
        ledger = uow.ledger.dead_letters
        depths = ledger.queue_depths(limit=10)
        totals = ledger.queue_totals()
        ticked = ledger.last_tick("default")
    assert [(d.session, d.queued, d.claimed) for d in depths] == [("busy", 3, 0), ("quiet", 1, 0)]
    assert depths[0].oldest_queued_at == oldest
    assert totals == {"queued": 4, "claimed": 0, "oldest_queued_at": oldest, "sessions": 2}
    assert ticked == (60_000, clock())
