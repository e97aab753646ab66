"""The events ledger: idempotent inserts under deterministic ids, first disposition wins."""

from __future__ import annotations

from nexus.db import Database
from nexus.ledger.enums import EventStatus
from nexus.ledger.records import EventDraft


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
