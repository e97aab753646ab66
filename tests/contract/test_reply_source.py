"""A session run hands the engine the event it read with the queue item: the reply is
addressed from it, the platform's raw update is read only where the address needs it,
and the deliveries are the same as when the event is read back."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import event as sql_event

from nexus.db import Database
from nexus.event import Container, NexusEvent
from tests.contract.outbound_support import OutboundRig, message, outbound_rig
from tests.fakes.platform_server import FakePlatforms
from tests.support import FakeClock


@pytest.fixture
def fake() -> Iterator[FakePlatforms]:
    with FakePlatforms() as platforms:
        yield platforms


@pytest.fixture
def rig(database: Database, clock: FakeClock, fake: FakePlatforms) -> OutboundRig:
    return outbound_rig(database, clock, fake)


def _reads_of_events(database: Database, answer: Callable[[], str]) -> tuple[list[str], str]:
    """The statements that read the events table while `answer()` runs, and its result."""
    seen: list[str] = []

    def statement(_c: object, _cur: object, sql: str, *_: object) -> None:
        if sql.lstrip().upper().startswith("SELECT") and "FROM events" in sql:
            seen.append(sql)

    sql_event.listen(database.engine, "before_cursor_execute", statement)
    try:
        result = answer()
    finally:
        sql_event.remove(database.engine, "before_cursor_execute", statement)
    return seen, result


def _targets(rig: OutboundRig, turn_id: str) -> list[tuple[str, dict[str, object], str]]:
    return [(d.platform, d.target, d.text) for d in rig.deliveries(turn_id)]


def _telegram(number: int) -> NexusEvent:
    return message(f"telegram:{number}", "telegram", "4242", "hi", message_id=f"7{number}")


def test_a_telegram_reply_is_addressed_from_the_event_the_run_read(rig: OutboundRig) -> None:
    first, second = _telegram(1), _telegram(2)
    rig.arrive(first)
    rig.arrive(second)
    session = rig.rig.session("dm:telegram:4242")
    read_back = rig.answer(session, first, "hello there")

    reads, known = _reads_of_events(rig.database, rig.answer_as_run(session, second, "hello there"))

    assert reads == []  # neither the event nor its raw update was read back
    [(platform, target, text)] = _targets(rig, known)
    [(_, earlier, _)] = _targets(rig, read_back)
    assert (platform, text) == ("telegram", "hello there")
    assert target == {**earlier, "reply_to": "72"}  # the same address, answering its own message


def test_a_discord_command_still_reads_the_raw_update_its_address_needs(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message(
        "discord:1", "discord", "9001", "/ask",
        container=Container(kind="group", id="C9"),
        raw={"token": "itoken", "application_id": "APP", "type": 2},
    )  # fmt: skip
    rig.arrive(event)
    session = rig.rig.session("group:discord:C9")

    reads, _ = _reads_of_events(rig.database, rig.answer_as_run(session, event, "ok"))

    assert len(reads) == 1  # the payload alone, not the event's columns again
    assert rig.pump() == ["sent"]
    assert [r.path for r in fake.messages] == ["/webhooks/APP/itoken/messages/@original"]


def test_an_email_reply_keeps_its_subject_and_thread_from_the_raw_update(
    rig: OutboundRig,
) -> None:
    event = message(
        "email:1", "email", "ada@example.com", "hello",
        message_id="<m1@example.com>",
        raw={"subject": "Plans", "message_id": "<m1@example.com>"},
    )  # fmt: skip
    rig.arrive(event)
    session = rig.rig.session("dm:email:ada@example.com")
    turn_id = rig.answer_as_run(session, event, "noted")()
    [(platform, target, _)] = _targets(rig, turn_id)
    assert platform == "email"
    assert target["subject"] == "Re: Plans"
    assert target["in_reply_to"] == "<m1@example.com>"
