"""Outbound delivery on both databases: replies reach the platform they came from, chunked,
retried, never doubled. Real senders over httpx, against loopback fake platforms."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import pytest
from sqlalchemy import event as sql_event
from standardwebhooks.webhooks import Webhook

from nexus.access.policy import load_policies
from nexus.adapters.scripted import Say
from nexus.arrival.messages import merge_people
from nexus.db import Database
from nexus.engine.stream_events import StreamEvent
from nexus.event import Container, NexusEvent
from nexus.ingest.service import ingest
from nexus.ledger.enums import DeliveryStatus
from nexus.outbound.planning import NO_REPLY
from tests.contract.outbound_support import (
    LONG_REPLY,
    WEBHOOK_SECRET,
    OutboundRig,
    arrive_telegram,
    fake,
    message,
    outbound_rig,
    rig,
    shown,
)
from tests.fakes.platform_server import FakePlatforms
from tests.support import FakeClock, build_chain, route_one

__all__ = ["fake", "rig"]  # the fixtures, for pytest


def test_a_9000_character_telegram_reply_arrives_as_three_messages_in_order(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    assert 8_500 < len(LONG_REPLY) < 9_500
    session = rig.rig.session("dm:ent_tg")
    turn_id = rig.answer(session, arrive_telegram(rig), LONG_REPLY)
    assert set(rig.pump()) == {"sent"}
    sent = fake.of("telegram")
    assert len(sent) == 3
    texts = [m.body["text"] for m in sent]
    # Telegram counts the limit on the text as shown, after the HTML markup is parsed.
    assert all(len(shown(t)) <= 4096 for t in texts)
    # The code block straddles a break: closed in one message, reopened in the next.
    assert sum("<pre>" in t for t in texts) == 2
    for text in texts:
        assert text.count("<pre>") == text.count("</pre>")
        assert text.count("<code") == text.count("</code>")
    assert texts[0].startswith("Paragraph 0.") and texts[2].rstrip().endswith("doubled.")
    assert [m.body.get("reply_parameters", {}).get("message_id") for m in sent] == [77, None, None]
    assert {m.body["chat_id"] for m in sent} == {"4242"}
    assert {m.body["parse_mode"] for m in sent} == {"HTML"}
    rows = rig.deliveries(turn_id)
    assert [(r.chunk_index, r.status, r.attempts) for r in rows] == [
        (0, DeliveryStatus.SENT, 1),
        (1, DeliveryStatus.SENT, 1),
        (2, DeliveryStatus.SENT, 1),
    ]
    assert all(r.provider_message_id for r in rows)
    with rig.database.unit_of_work() as uow:
        reply = uow.ledger.events.get(f"reply:{turn_id}")
    assert reply is not None and reply.direction == "outbound" and reply.text == LONG_REPLY.strip()
    assert reply.disposition == "delivering" and reply.reply_to == "77"


def test_a_429_with_retry_after_is_sent_once_after_the_wait(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    fake.fail_next(
        "telegram",
        429,
        {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 5",
         "parameters": {"retry_after": 5}},
    )  # fmt: skip
    session = rig.rig.session("dm:ent_tg")
    turn_id = rig.answer(session, arrive_telegram(rig), "Short answer.")
    first = rig.service.send(rig.doorbell.deliveries.pop(0)[0])
    assert first == "retry"
    [(delivery_id, delay_ms)] = rig.doorbell.deliveries
    assert delay_ms == 5_000  # the platform's wait, over the 1 s backoff
    [row] = rig.deliveries(turn_id)
    assert row.status == DeliveryStatus.PENDING and "retry after 5" in (row.error or "")
    assert rig.service.send(delivery_id) == "skipped"  # rung early: not due yet
    assert rig.pump() == ["sent"]
    assert len(fake.requests) == 2 and len(fake.of("telegram")) == 1
    [row] = rig.deliveries(turn_id)
    assert row.status == DeliveryStatus.SENT and row.attempts == 2


def test_a_403_fails_at_once_with_every_later_chunk_and_is_never_retried(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    fake.fail_next(
        "telegram",
        403,
        {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"},
    )
    session = rig.rig.session("dm:ent_tg")
    turn_id = rig.answer(session, arrive_telegram(rig), LONG_REPLY)
    assert rig.pump() == ["failed"]
    assert len(fake.requests) == 1 and fake.messages == []
    rows = rig.deliveries(turn_id)
    assert [r.status for r in rows] == [DeliveryStatus.FAILED] * 3
    assert "blocked by the user" in (rows[0].error or "")
    assert rows[0].attempts == 1 and "chunk 0 failed" in (rows[2].error or "")


def test_a_reply_for_a_platform_with_no_sender_fails_at_once_without_a_rate_slot(
    rig: OutboundRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A platform Nexus cannot send to (no credentials configured) takes none of the
    # platform's shared rate and makes no run wait for it: nothing will be sent anyway.
    reserved: list[str] = []
    real_reserve = rig.service.limiter.reserve

    def reserve(key: str, per_second: float) -> int:
        reserved.append(key)
        return real_reserve(key, per_second)

    monkeypatch.setattr(rig.service.limiter, "reserve", reserve)
    others = {name: sender for name, sender in rig.service.senders.items() if name != "telegram"}
    monkeypatch.setattr(rig.service, "senders", others)
    session = rig.rig.session("dm:ent_tg")
    turn_id = rig.answer(session, arrive_telegram(rig), "hello")
    assert rig.pump() == ["failed"]
    [row] = rig.deliveries(turn_id)
    assert row.status == DeliveryStatus.FAILED and "no outbound sender" in (row.error or "")
    assert reserved == [] and rig.sleeps == []


def test_transient_failures_stop_after_three_attempts(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    for _ in range(3):
        fake.fail_next("telegram", 502, {"ok": False, "description": "Bad Gateway"})
    session = rig.rig.session("dm:ent_tg")
    turn_id = rig.answer(session, arrive_telegram(rig), "hello")
    assert rig.pump() == ["retry", "retry", "failed"]
    [row] = rig.deliveries(turn_id)
    assert row.status == DeliveryStatus.FAILED and row.attempts == 3
    assert "gave up after 3 attempts" in (row.error or "")


def test_a_slack_thread_reply_goes_to_the_thread(rig: OutboundRig, fake: FakePlatforms) -> None:
    channel = Container(kind="channel", id="C0123")
    event = message(
        "slack:Ev1", "slack", "U42", "what about **this**?", container=channel,
        thread="1700000000.000100", message_id="1700000000.000200",
    )  # fmt: skip
    rig.arrive(event)
    session = rig.rig.session("group:slack:C0123:thread:1700000000.000100")
    rig.answer(session, event, "It is **fine** & <safe>.")
    assert rig.pump() == ["sent"]
    [sent] = fake.of("slack")
    assert sent.body["channel"] == "C0123"
    assert sent.body["thread_ts"] == "1700000000.000100"
    assert sent.body["text"] == "It is *fine* &amp; &lt;safe&gt;."
    assert sent.headers["authorization"] == "Bearer xoxb-test"


def test_a_merged_entitys_reply_goes_back_through_the_platform_it_came_from(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    policies = load_policies(None)
    telegram = message("telegram:1", "telegram", "4242", "hi", message_id="5")
    rig.arrive(telegram)
    with rig.database.unit_of_work() as uow:
        first = route_one(uow, telegram.id, policies, rig.doorbell)
        primary = uow.ledger.sessions.resolve(first.session_label or "")
        assert primary is not None
        build_chain(uow.ledger, primary, 3)  # the Telegram session has the history
        tg_entity = uow.ledger.identity.contact_entity("telegram", "4242")
        uow.commit()
    whatsapp = message(
        "whatsapp:wamid.A", "whatsapp", "15551234567", "it's me on WhatsApp",
        message_id="wamid.A", space="PHONE_ID",
    )  # fmt: skip
    rig.arrive(whatsapp)
    with rig.database.unit_of_work() as uow:
        route_one(uow, whatsapp.id, policies, rig.doorbell)
        wa_entity = uow.ledger.identity.contact_entity("whatsapp", "15551234567")
        assert tg_entity is not None and wa_entity is not None
        uow.ledger.identity.create_entity("ent_ada", kind="person", name="Ada")
        merge_people(uow, into="ent_ada", merged=[tg_entity, wa_entity], doorbell=rig.doorbell)
        uow.commit()
    later = message(
        "whatsapp:wamid.B", "whatsapp", "15551234567", "still there?",
        message_id="wamid.B", space="PHONE_ID",
    )  # fmt: skip
    rig.arrive(later)
    with rig.database.unit_of_work() as uow:
        routed = route_one(uow, later.id, policies, rig.doorbell)
        uow.commit()
    assert routed.session_id == primary.id  # the alias led it to the Telegram session
    rig.answer(primary, later, "Yes, here.")
    assert rig.pump() == ["sent"]
    assert fake.of("telegram") == []
    [sent] = fake.of("whatsapp")
    assert sent.path == "/PHONE_ID/messages"
    assert sent.body["to"] == "15551234567"
    assert sent.body["context"] == {"message_id": "wamid.B"}
    assert sent.body["text"]["body"] == "Yes, here."


def test_status_callbacks_move_a_delivery_forward_only(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message("whatsapp:wamid.Q", "whatsapp", "155500", "hi", space="PHONE_ID")
    rig.arrive(event)
    session = rig.rig.session("dm:ent_wa")
    turn_id = rig.answer(session, event, "Hello!")
    assert rig.pump() == ["sent"]
    [row] = rig.deliveries(turn_id)
    wamid = row.provider_message_id
    assert wamid is not None and wamid.startswith("wamid.")

    def status(word: str) -> DeliveryStatus:
        callback = NexusEvent(
            id=f"whatsapp:status:{wamid}:{word}", adapter="whatsapp", platform="whatsapp",
            kind="status", message_id=wamid, occurred_at=0, delivery_status=word,
            ignore_reason=f"delivery status {word}",
        )  # fmt: skip
        with rig.database.unit_of_work() as uow:
            ingest(uow, [callback], rig.doorbell)
            uow.commit()
        [now] = rig.deliveries(turn_id)
        return now.status

    assert status("delivered") == DeliveryStatus.DELIVERED
    assert status("read") == DeliveryStatus.READ
    assert status("sent") == DeliveryStatus.READ  # late news changes nothing
    with rig.database.unit_of_work() as uow:
        stored = uow.ledger.events.get(f"whatsapp:status:{wamid}:read")
    assert stored is not None and stored.disposition == "status"
    assert "is now read" in (stored.disposition_detail or "")


def _discord_command(rig: OutboundRig, text: str) -> NexusEvent:
    """A slash command in a Discord channel, stored: its reply edits the interaction."""
    event = message(
        "discord:1", "discord", "9001", text,
        container=Container(kind="group", id="C9"),
        raw={"token": "itoken", "application_id": "APP", "type": 2},
    )  # fmt: skip
    rig.arrive(event)
    return event


def test_a_discord_command_edits_its_thinking_answer_then_follows_up(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = _discord_command(rig, "/ask everything")
    session = rig.rig.session("group:discord:C9")
    rig.answer(session, event, "word " * 600)  # 3,000 characters: two Discord messages
    assert rig.pump() == ["sent", "sent"]
    assert [(r.kind, r.path) for r in fake.messages] == [
        ("discord_original", "/webhooks/APP/itoken/messages/@original"),
        ("discord_followup", "/webhooks/APP/itoken"),
    ]
    assert all(r.body["allowed_mentions"] == {"parse": []} for r in fake.messages)


def test_a_send_that_lapsed_mid_call_is_not_repeated_where_the_platform_cannot_deduplicate(
    rig: OutboundRig, fake: FakePlatforms, clock: FakeClock
) -> None:
    session = rig.rig.session("dm:ent_tg")
    turn_id = rig.answer(session, arrive_telegram(rig), "Once only.")
    delivery_id, _ = rig.doorbell.deliveries.pop(0)
    _crash_after_sending(rig, delivery_id)
    assert len(fake.of("telegram")) == 1  # the platform has it; the ledger never heard
    clock.advance(rig.service.lease_ms + 1)
    recovered = rig.service.recover()
    assert (recovered.resent, recovered.failed) == (0, 1)
    assert rig.pump() == []
    [row] = rig.deliveries(turn_id)
    assert row.status == DeliveryStatus.FAILED and "outcome unknown" in (row.error or "")
    assert len(fake.of("telegram")) == 1


def test_a_lapsed_send_is_repeated_safely_where_a_nonce_deduplicates(
    rig: OutboundRig, fake: FakePlatforms, clock: FakeClock
) -> None:
    event = message(
        "webhook:1", "discord", "9001", "hi", container=Container(kind="group", id="C7"),
        message_id="555",
    )  # fmt: skip
    rig.arrive(event)
    session = rig.rig.session("group:discord:C7")
    turn_id = rig.answer(session, event, "Exactly once.")
    delivery_id, _ = rig.doorbell.deliveries.pop(0)
    _crash_after_sending(rig, delivery_id)
    clock.advance(rig.service.lease_ms + 1)
    assert rig.service.recover().resent == 1
    assert rig.pump() == ["sent"]
    assert len(fake.requests) == 2 and len(fake.of("discord_channel")) == 1
    [row] = rig.deliveries(turn_id)
    assert row.status == DeliveryStatus.SENT and row.attempts == 2
    first, second = fake.requests
    assert first.body["nonce"] == second.body["nonce"] and first.body["enforce_nonce"] is True
    assert first.body["message_reference"]["message_id"] == "555"


def test_no_delivery_for_a_silent_answer_or_an_api_question(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    session = rig.rig.session("dm:ent_tg")
    silent = rig.answer(session, arrive_telegram(rig), NO_REPLY)
    rig.rig.model.push(Say("From the API."))
    asked = rig.rig.say(session.id, "asked over the API").turn_id  # no source event
    assert rig.doorbell.deliveries == []
    assert rig.deliveries(silent) == [] and rig.deliveries(asked) == []


def _crash_after_sending(rig: OutboundRig, delivery_id: str) -> None:
    """What a worker killed between the platform's answer and the ledger's update leaves."""
    with rig.database.unit_of_work() as uow:
        taken = uow.ledger.deliveries.begin_send(delivery_id, lease_ms=rig.service.lease_ms)
        uow.commit()
    assert taken is not None
    rig.service.senders[taken.platform].send(taken)


def test_an_sms_reply_goes_back_from_the_number_it_was_sent_to(
    database: Database, clock: FakeClock, fake: FakePlatforms
) -> None:
    rig = outbound_rig(database, clock, fake, public_url="https://bot.example.com")
    event = message("twilio:SM1", "twilio", "+15551230000", "hi", space="+18005550100")
    rig.arrive(event)
    session = rig.rig.session("dm:ent_sms")
    turn_id = rig.answer(session, event, "**Hello** from [Nexus](https://nexus.example)")
    assert rig.pump() == ["sent"]
    [sent] = fake.of("twilio")
    assert sent.path == "/2010-04-01/Accounts/AC00000000000000000000000000000000/Messages.json"
    assert sent.body == {
        "To": "+15551230000",
        "From": "+18005550100",
        "Body": "Hello from Nexus (https://nexus.example)",
        "StatusCallback": "https://bot.example.com/v1/inbound/twilio",
    }
    assert sent.headers["authorization"].startswith("Basic ")
    [row] = rig.deliveries(turn_id)
    assert row.provider_message_id is not None and row.provider_message_id.startswith("SM")
    callback = NexusEvent(
        id=f"twilio:status:{row.provider_message_id}:undelivered", adapter="twilio",
        platform="sms", kind="status", message_id=row.provider_message_id, occurred_at=0,
        delivery_status="undelivered", ignore_reason="delivery status undelivered",
    )  # fmt: skip
    with database.unit_of_work() as uow:
        ingest(uow, [callback], rig.doorbell)
        uow.commit()
    assert rig.deliveries(turn_id)[0].status == DeliveryStatus.FAILED


def test_a_webhook_reply_is_signed_and_carries_its_delivery_id(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message("webhook:evt_1", "webhook", "bridge", "ping")
    rig.arrive(event)
    session = rig.rig.session("dm:ent_bridge")
    rig.answer(session, event, "pong with `code`")
    assert rig.pump() == ["sent"]
    [sent] = fake.of("webhook")
    raw = json.dumps({"type": "nexus.reply", "data": sent.body["data"]}, separators=(",", ":"))
    verified = Webhook(WEBHOOK_SECRET).verify(raw, sent.headers)
    assert verified["data"]["text"] == "pong with `code`"  # the model's Markdown, untouched
    assert verified["data"]["in_reply_to"] == "webhook:evt_1"
    assert sent.headers["webhook-id"].startswith("msg_")


# -- a reply addressed from the event the session run read ----------------------------------
# A session run hands the engine the event it read with the queue item: the reply is
# addressed from it, the platform's raw update is read only where the address needs it,
# and the deliveries are the same as when the event is read back.


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


def _telegram_dm(number: int) -> NexusEvent:
    return message(f"telegram:{number}", "telegram", "4242", "hi", message_id=f"7{number}")


def test_a_telegram_reply_is_addressed_from_the_event_the_run_read(rig: OutboundRig) -> None:
    first, second = _telegram_dm(1), _telegram_dm(2)
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
    event = _discord_command(rig, "/ask")
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


def test_a_replys_turn_is_on_the_stream_before_its_delivery_is_rung(
    rig: OutboundRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit's report (one publish) goes out before the commit's doorbells: a watcher
    learns of the turn a broker publish sooner, and the delivery waits one round trip."""
    published_at_ring: list[list[str]] = []
    ring = rig.doorbell.delivery_ready

    def delivery_ready(delivery_id: str, delay_ms: int = 0) -> None:
        published_at_ring.append(rig.rig.publisher.types())
        ring(delivery_id, delay_ms)

    monkeypatch.setattr(rig.doorbell, "delivery_ready", delivery_ready)
    event = arrive_telegram(rig)
    session = rig.rig.session("dm:telegram:4242")

    rig.answer(session, event, "hello there")

    [types] = published_at_ring
    assert types[-2:] == ["turn.committed", "session.completed"]
    assert rig.rig.publisher.types()[-2:] == ["turn.committed", "session.completed"]
    assert rig.pump() == ["sent"]


def test_a_committed_turn_whose_report_cannot_be_published_still_answers(
    rig: OutboundRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream is best effort: Redis failing as the report goes out leaves the turn
    committed (not reported to the run as a crash) and its reply still rung."""
    publisher = rig.rig.publisher
    publish_many = publisher.publish_many

    def failing(events: Sequence[StreamEvent]) -> None:
        if any(event.type == "turn.committed" for event in events):
            raise ConnectionError("the stream's Redis went away")
        publish_many(events)

    monkeypatch.setattr(publisher, "publish_many", failing)
    event = arrive_telegram(rig)
    session = rig.rig.session("dm:telegram:4242")

    turn_id = rig.answer(session, event, "hello there")

    assert "turn.committed" not in publisher.types()
    assert [delivery.turn_id for delivery in rig.deliveries(turn_id)] == [turn_id]
    assert rig.pump() == ["sent"]
