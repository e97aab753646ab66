"""The router, entity merges and the relay, on both databases."""

from __future__ import annotations

import pytest

from nexus.access.policy import load_policies, parse_policies
from nexus.arrival.messages import merge_people
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.event import Author, Container, NexusEvent
from nexus.ingest.relay import relay
from nexus.ingest.service import ingest
from nexus.ledger.enums import EventStatus, QueueMode, QueueStatus
from nexus.ledger.repository import LedgerConflict
from tests.support import FakeClock, build_chain, route_one

POLICIES = load_policies(None)


def _message(
    event_id: str,
    platform: str,
    sender: str,
    text: str = "hi",
    *,
    container: Container | None = None,
    thread: str | None = None,
) -> NexusEvent:
    return NexusEvent(
        id=event_id,
        adapter=platform,
        platform=platform,
        sender=Author(id=sender, display_name=sender),
        container=container or Container(kind="dm", id=sender),
        platform_thread_id=thread,
        text=text,
        occurred_at=0,
    )


def _arrive(database: Database, event: NexusEvent, doorbell: RecordingDoorbell):
    with database.unit_of_work() as uow:
        ingest(uow, [event], doorbell)
        uow.commit()
    with database.unit_of_work() as uow:
        routed = route_one(uow, event.id, POLICIES, doorbell)
        uow.commit()
    return routed


def test_a_dm_lands_in_the_senders_entity_session(database: Database) -> None:
    doorbell = RecordingDoorbell()
    routed = _arrive(database, _message("imessage:1", "imessage", "+15559876543"), doorbell)
    assert routed.disposition == "queued"
    with database.unit_of_work() as uow:
        entity = uow.ledger.identity.contact_entity("imessage", "+15559876543")
        event = uow.ledger.events.get("imessage:1")
        items = uow.ledger.queue.for_session(routed.session_id or "")
    assert routed.session_label == f"dm:{entity}"
    assert event is not None
    assert (event.status, event.disposition) == (EventStatus.PROCESSED, "queued")
    assert [(i.event_id, i.mode, i.status) for i in items] == [
        ("imessage:1", QueueMode.INTERRUPT, QueueStatus.QUEUED)
    ]
    assert doorbell.sessions == [routed.session_id]


def test_group_and_thread_messages_get_their_own_sessions(database: Database) -> None:
    doorbell = RecordingDoorbell()
    group = Container(kind="group", id="eng")
    plain = _arrive(database, _message("slack:1", "slack", "U1", container=group), doorbell)
    threaded = _arrive(
        database, _message("slack:2", "slack", "U2", container=group, thread="ts123"), doorbell
    )
    assert plain.session_label == "group:slack:eng"
    assert threaded.session_label == "group:slack:eng:thread:ts123"


def test_routing_twice_queues_once(database: Database) -> None:
    doorbell = RecordingDoorbell()
    first = _arrive(database, _message("telegram:9", "telegram", "42"), doorbell)
    with database.unit_of_work() as uow:
        again = route_one(uow, "telegram:9", POLICIES, doorbell)
        uow.commit()
    assert again.disposition == "already processed"
    with database.unit_of_work() as uow:
        assert len(uow.ledger.queue.for_session(first.session_id or "")) == 1
    assert len(doorbell.sessions) == 1


def test_a_denied_event_keeps_its_reason_and_queues_nothing(database: Database) -> None:
    doorbell = RecordingDoorbell()
    event = _message("telegram:5", "telegram", "42", container=Container(kind="group", id="-1"))
    with database.unit_of_work() as uow:
        ingest(uow, [event], doorbell)
        uow.commit()
    strict = parse_policies(
        "- name: dms-only\n  match: {delivery: {peer_kind: dm}}\n"
        "  session: {key: 'dm:{principal.entity_id}', persona: atlas}\n"
    )
    with database.unit_of_work() as uow:
        routed = route_one(uow, "telegram:5", strict, doorbell)
        uow.commit()
    assert routed.disposition == "denied"
    with database.unit_of_work() as uow:
        stored = uow.ledger.events.get("telegram:5")
    assert stored is not None and stored.disposition == "denied"
    assert "no policy matched a known principal in a group" in (stored.disposition_detail or "")
    assert doorbell.sessions == []


def test_seed_002_identity_story(database: Database) -> None:
    """Mom on iMessage (day 1), a merge (day 3), Gmail (day 7), a second merge."""
    doorbell = RecordingDoorbell()
    day1 = _arrive(database, _message("imessage:d1", "imessage", "+15559876543"), doorbell)
    with database.unit_of_work() as uow:
        imessage = uow.ledger.sessions.resolve(day1.session_label or "")
        assert imessage is not None
        build_chain(uow.ledger, imessage, 20)  # 20 turns about project planning
        ent_001 = uow.ledger.identity.contact_entity("imessage", "+15559876543")
        assert ent_001 is not None
        # Day 3: the memory-writer learns this is Sarah and merges.
        uow.ledger.identity.create_entity("ent_sarah", kind="person", name="Sarah")
        first = merge_people(uow, into="ent_sarah", merged=[ent_001], doorbell=doorbell)
        uow.commit()
    assert first.primary_session == f"dm:{ent_001}"
    assert first.aliases_created == ("dm:ent_sarah",)

    # Day 7: Mom emails from a new address; a new entity, a new session (5 turns).
    day7 = _arrive(database, _message("email:d7", "email", "mom@gmail.com"), doorbell)
    with database.unit_of_work() as uow:
        gmail = uow.ledger.sessions.resolve(day7.session_label or "")
        assert gmail is not None and gmail.id != imessage.id
        build_chain(uow.ledger, gmail, 5)
        ent_003 = uow.ledger.identity.contact_entity("email", "mom@gmail.com")
        assert ent_003 is not None
        second = merge_people(uow, into="ent_sarah", merged=[ent_003], doorbell=doorbell)
        uow.commit()
    assert second.primary_session == f"dm:{ent_001}"  # most turns wins
    assert second.aliases_created == (f"dm:{ent_003}",)

    # The next Gmail message lands in the iMessage session.
    later = _arrive(database, _message("email:d8", "email", "mom@gmail.com"), doorbell)
    assert later.session_id == imessage.id
    with database.unit_of_work() as uow:
        aliases = uow.ledger.sessions.aliases_of(f"dm:{ent_001}")
        imessage_now = uow.ledger.sessions.get(imessage.id)
        gmail_now = uow.ledger.sessions.get(gmail.id)
        assert imessage_now is not None and gmail_now is not None
        assert len(uow.ledger.threads.read_ancestry(imessage_now.thread_id or "")) == 20
        assert len(uow.ledger.threads.read_ancestry(gmail_now.thread_id or "")) == 5
        notices = [
            i.payload.get("kind")
            for i in uow.ledger.queue.for_session(imessage.id)
            if i.event_id is None
        ]
    assert set(aliases) == {("dm:ent_sarah", "identity_merge"), (f"dm:{ent_003}", "identity_merge")}
    assert notices == ["identity_merge", "identity_merge"]


def test_merging_twice_or_in_a_circle_is_refused(database: Database) -> None:
    with database.unit_of_work() as uow:
        for name in ("ent_a", "ent_b"):
            uow.ledger.identity.create_entity(name, kind="person", name=name)
        merge_people(uow, into="ent_a", merged=["ent_b"], doorbell=RecordingDoorbell())
        with pytest.raises(LedgerConflict, match="already the same person"):
            merge_people(uow, into="ent_b", merged=["ent_a"], doorbell=RecordingDoorbell())


def test_relay_rings_what_is_still_owed(database: Database, clock: FakeClock) -> None:
    silent = RecordingDoorbell()
    with database.unit_of_work() as uow:
        ingest(uow, [_message("telegram:1", "telegram", "1")], silent)
        uow.commit()
    with database.unit_of_work() as uow:
        route_one(uow, "telegram:1", POLICIES, silent)
        ingest(uow, [_message("telegram:2", "telegram", "2")], silent)
        uow.commit()
    clock.advance(10_000)
    doorbell = RecordingDoorbell()
    with database.unit_of_work() as uow:
        counts = relay(uow, doorbell)
    assert doorbell.events == ["telegram:2"]  # routed events are not re-rung
    assert len(doorbell.sessions) == 1
    assert (counts.events, counts.sessions) == (1, 1)


def test_a_sender_is_its_canonical_entity_through_merges(database: Database) -> None:
    doorbell = RecordingDoorbell()
    _arrive(database, _message("sms:1", "sms", "+15550001111"), doorbell)
    with database.unit_of_work() as uow:
        own = uow.ledger.identity.sender_entity("sms", "+15550001111")
        assert own is not None and own.merged_into is None
        for name in ("ent_person", "ent_household"):
            uow.ledger.identity.create_entity(name, kind="person", name=name)
        merge_people(uow, into="ent_person", merged=[own.id], doorbell=doorbell)
        merge_people(uow, into="ent_household", merged=["ent_person"], doorbell=doorbell)
        merged = uow.ledger.identity.sender_entity("sms", "+15550001111")
        stranger = uow.ledger.identity.sender_entity("sms", "+15559999999")
    assert merged is not None and merged.id == "ent_household"
    assert stranger is None
