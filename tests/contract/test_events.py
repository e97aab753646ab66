"""The events ledger: idempotent inserts under deterministic ids, first disposition wins."""

from __future__ import annotations

from sqlalchemy import event as sql_event
from sqlalchemy import text

from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.enums import EventStatus
from nexus.ledger.records import EventDraft
from tests.support import FakeClock


def _event(event_id: str = "telegram:1001", text: str = "hi") -> EventDraft:
    return EventDraft(
        id=event_id,
        adapter="telegram",
        platform="telegram",
        sender_id="42",
        container_kind="dm",
        container_id="42",
        text=text,
        occurred_at=1_767_225_600_000,
        payload={"update_id": 1001, "message": {"text": text}},
    )


def test_insert_is_idempotent_on_the_event_id(database: Database) -> None:
    with database.unit_of_work() as uow:
        assert uow.ledger.events.insert(_event()) is True
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.events.insert(_event(text="a changed retry")) is False
        uow.commit()
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get("telegram:1001")
    assert stored is not None
    assert stored.text == "hi"  # the first delivery is kept as it came
    assert stored.status == EventStatus.RECEIVED


def test_first_disposition_sticks(database: Database) -> None:
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(_event())
        assert uow.ledger.events.mark_processed("telegram:1001", "routed")
        assert not uow.ledger.events.mark_processed("telegram:1001", "denied", "too late")
        uow.commit()
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get("telegram:1001")
    assert stored is not None
    assert (stored.status, stored.disposition) == (EventStatus.PROCESSED, "routed")


def test_unprocessed_lists_what_the_relay_must_re_ring(database: Database, clock) -> None:
    with database.unit_of_work() as uow:
        uow.ledger.events.insert(_event("telegram:1"))
        clock.advance(10)
        uow.ledger.events.insert(_event("telegram:2"))
        uow.ledger.events.insert(_event("telegram:3"))
        uow.ledger.events.mark_processed("telegram:3", "routed")
        uow.commit()
    with database.unit_of_work() as uow:
        assert uow.ledger.events.unprocessed(received_before=clock.now + 1) == [
            "telegram:1",
            "telegram:2",
        ]
        assert uow.ledger.events.unprocessed(received_before=clock.now) == ["telegram:1"]


def _message(event_id: str, name: str = "Ann") -> NexusEvent:
    return NexusEvent(
        id=event_id,
        adapter="telegram",
        platform="telegram",
        sender=Author(id="ann", display_name=name),
        container=Container(kind="dm", id="ann"),
        text=f"{event_id} says hi",
        occurred_at=1,
    )


def test_a_known_senders_message_is_stored_with_their_contact_touched_in_one_statement(
    database: Database, clock: FakeClock
) -> None:
    """The webhook's write for someone seen before is one statement on Postgres: their
    contact touched (name, last seen) and the event stored with it. A first contact, and a
    platform's redelivery, come out as they always did."""
    with database.unit_of_work() as uow:
        [first] = ingest(uow, [_message("telegram:1")], RecordingDoorbell())
        contact = uow.ledger.identity.touch_contact("telegram", "ann", "Ann")
        uow.commit()
    statements: list[str] = []

    def record(_conn: object, _cursor: object, sql: str, *_: object) -> None:
        statements.append(sql)

    clock.advance(5)
    sql_event.listen(database.engine, "before_cursor_execute", record)
    try:
        with database.unit_of_work() as uow:
            [second] = ingest(uow, [_message("telegram:2", "Ann B.")], RecordingDoorbell())
            [again] = ingest(uow, [_message("telegram:2", "Ann B.")], RecordingDoorbell())
            uow.commit()
    finally:
        sql_event.remove(database.engine, "before_cursor_execute", record)
    assert first.stored and second.stored and not again.stored
    writes = [s for s in statements if not s.lstrip().upper().startswith("BEGIN")]
    if database.dialect == "postgresql":
        assert len(writes) == 2  # one per delivery of telegram:2
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get("telegram:2")
        found = uow.connection.execute(
            text("SELECT display_name, last_seen_at FROM contacts WHERE id = :id"),
            {"id": contact},
        ).one()
    assert stored is not None and stored.contact_id == contact
    assert stored.status == EventStatus.RECEIVED
    assert tuple(found) == ("Ann B.", clock())
