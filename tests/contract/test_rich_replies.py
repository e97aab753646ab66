"""Rich replies end to end on both databases: the scripted model attaches buttons and embeds
with present_options, the real senders carry them to the fake platforms (or as lines of
text where a platform has none), and a pressed button comes back into the same session."""

from __future__ import annotations

import json
from email import message_from_bytes
from email.message import Message
from typing import Any
from urllib.parse import urlencode

from aiosmtpd.controller import Controller

from nexus.access.policy import load_policies
from nexus.adapters.inbound.base import InboundRequest
from nexus.adapters.inbound.discord import DiscordAdapter
from nexus.adapters.inbound.slack import SlackAdapter
from nexus.adapters.inbound.telegram import TelegramAdapter
from nexus.adapters.scripted import CallTools, Say
from nexus.db import Database
from nexus.event import Container, NexusEvent
from nexus.ingest.batch import ProcessedEvent
from nexus.ledger.records import SessionRecord
from tests.contract.outbound_support import (
    LONG_REPLY,
    OutboundRig,
    fake,
    message,
    outbound_rig,
    rig,
    shown,
)
from tests.fakes.platform_server import FakePlatforms
from tests.support import FakeClock, free_port, route_one

__all__ = ["fake", "rig"]  # the fixtures, for pytest

OPTIONS: dict[str, Any] = {
    "buttons": [
        [{"label": "Pay now", "value": "pay"}, {"label": "Later", "value": "later"}],
        [{"label": "Invoice PDF", "url": "https://example.com/i/42.pdf"}],
    ],
    "embeds": [
        {
            "title": "Invoice 42",
            "description": "Due Friday",
            "url": "https://example.com/i/42",
            "fields": [{"name": "Total", "value": "120 EUR", "inline": True}],
        }
    ],
}
KEYBOARD = {
    "inline_keyboard": [
        [
            {"text": "Pay now", "callback_data": "pay"},
            {"text": "Later", "callback_data": "later"},
        ],
        [{"text": "Invoice PDF", "url": "https://example.com/i/42.pdf"}],
    ]
}
EMBED_LINES = "Invoice 42\nDue Friday\nTotal: 120 EUR\nhttps://example.com/i/42"
FALLBACK = (
    f"{EMBED_LINES}\n\n"
    "Reply with one of:\n1. Pay now\n2. Later\n\n"
    "Invoice PDF: https://example.com/i/42.pdf"
)
COMPONENTS = [
    {
        "type": 1,
        "components": [
            {"type": 2, "style": 1, "label": "Pay now", "custom_id": "pay"},
            {"type": 2, "style": 1, "label": "Later", "custom_id": "later"},
        ],
    },
    {
        "type": 1,
        "components": [
            {"type": 2, "style": 5, "label": "Invoice PDF", "url": "https://example.com/i/42.pdf"}
        ],
    },
]


def _session(rig: OutboundRig, label: str, persona: str = "assistant") -> SessionRecord:
    return rig.rig.session(label, persona=persona, capabilities=("rich_replies",))


def _answer_rich(
    rig: OutboundRig,
    session: SessionRecord,
    event: NexusEvent,
    text: str,
    options: dict[str, Any] = OPTIONS,
) -> str:
    """A turn in which the model calls present_options, then answers `text`."""
    rig.rig.model.push(CallTools((("present_options", options),)), Say(text))
    outcome = rig.rig.say(session.id, event.text or "", event_id=event.id)
    assert outcome.status == "committed", outcome
    return outcome.turn_id


def test_a_long_telegram_reply_carries_its_keyboard_on_the_last_message_only(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message("telegram:1", "telegram", "4242", "my invoice?", message_id="77")
    rig.arrive(event)
    turn_id = _answer_rich(rig, _session(rig, "dm:ent_tg"), event, LONG_REPLY)
    assert set(rig.pump()) == {"sent"}
    sent = fake.of("telegram")
    assert len(sent) == 3
    assert [m.body.get("reply_markup") for m in sent] == [None, None, KEYBOARD]
    assert all(len(shown(m.body["text"])) <= 4096 for m in sent)
    # Telegram has no embeds: the card is lines at the end of the text (its links are
    # linked by Telegram itself); the link button is on the keyboard, not in the text.
    assert sent[2].body["text"].endswith(f"doubled.\n\n{EMBED_LINES}")
    with rig.database.unit_of_work() as uow:
        reply = uow.ledger.events.get(f"reply:{turn_id}")
        payload = uow.ledger.events.payload_of(f"reply:{turn_id}")
    assert reply is not None and reply.text == LONG_REPLY.strip()  # the answer as written
    assert payload["rich"]["buttons"][0][0] == {"label": "Pay now", "value": "pay"}


def test_slack_gets_blocks_with_the_text_the_card_and_the_buttons(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message(
        "slack:Ev1", "slack", "U1", "invoice?", container=Container(kind="channel", id="C1"),
        thread="1700000000.000100",
    )  # fmt: skip
    rig.arrive(event)
    _answer_rich(rig, _session(rig, "group:slack:C1"), event, "Here is **your** invoice.")
    assert rig.pump() == ["sent"]
    [sent] = fake.of("slack")
    body = sent.body
    assert body["text"] == "Here is *your* invoice." and body["thread_ts"] == "1700000000.000100"
    assert [b["type"] for b in body["blocks"]] == ["section", "section", "actions", "actions"]
    assert body["blocks"][0]["text"] == {"type": "mrkdwn", "text": "Here is *your* invoice."}
    assert (
        body["blocks"][1]["text"]["text"] == "*<https://example.com/i/42|Invoice 42>*\nDue Friday"
    )
    assert body["blocks"][1]["fields"] == [{"type": "mrkdwn", "text": "*Total*\n120 EUR"}]
    assert body["blocks"][2]["elements"] == [
        {"type": "button", "text": {"type": "plain_text", "text": "Pay now"},
         "action_id": "nexus_0_0", "value": "pay"},
        {"type": "button", "text": {"type": "plain_text", "text": "Later"},
         "action_id": "nexus_0_1", "value": "later"},
    ]  # fmt: skip


def test_a_discord_channel_message_carries_embeds_and_buttons(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message(
        "discord:m1", "discord", "9001", "invoice?", container=Container(kind="group", id="C7"),
        message_id="555",
    )  # fmt: skip
    rig.arrive(event)
    _answer_rich(rig, _session(rig, "group:discord:C7"), event, "Your invoice.")
    assert rig.pump() == ["sent"]
    [sent] = fake.of("discord_channel")
    assert sent.body["content"] == "Your invoice."
    assert sent.body["embeds"] == [
        {
            "title": "Invoice 42",
            "description": "Due Friday",
            "url": "https://example.com/i/42",
            "fields": [{"name": "Total", "value": "120 EUR", "inline": True}],
        }
    ]
    assert sent.body["components"] == COMPONENTS


def test_a_discord_command_answer_puts_the_buttons_on_its_last_follow_up(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message(
        "discord:1", "discord", "9001", "/ask invoice",
        container=Container(kind="group", id="C9"),
        raw={"token": "itoken", "application_id": "APP", "type": 2},
    )  # fmt: skip
    rig.arrive(event)
    _answer_rich(rig, _session(rig, "group:discord:C9"), event, "word " * 600)
    assert rig.pump() == ["sent", "sent"]
    first, last = fake.messages
    assert first.kind == "discord_original" and "components" not in first.body
    assert last.kind == "discord_followup" and last.body["components"] == COMPONENTS


def test_sms_gets_the_options_as_numbered_lines(rig: OutboundRig, fake: FakePlatforms) -> None:
    event = message("twilio:SM1", "twilio", "+15551230000", "invoice?", space="+18005550100")
    rig.arrive(event)
    _answer_rich(rig, _session(rig, "dm:ent_sms"), event, "Your invoice.")
    assert rig.pump() == ["sent"]
    [sent] = fake.of("twilio")
    assert sent.body["Body"] == f"Your invoice.\n\n{FALLBACK}"


def test_a_webhook_reply_gets_the_lines_and_the_form_itself(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message("webhook:w1", "webhook", "bridge-user", "invoice?")
    rig.arrive(event)
    _answer_rich(rig, _session(rig, "dm:ent_hook"), event, "Your invoice.")
    assert rig.pump() == ["sent"]
    [sent] = fake.of("webhook")
    data = sent.body["data"]
    assert data["text"] == f"Your invoice.\n\n{FALLBACK}"
    assert data["rich"]["buttons"][1] == [
        {"label": "Invoice PDF", "url": "https://example.com/i/42.pdf"}
    ]


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 Message accepted for delivery"


def test_an_email_reply_gets_the_options_as_lines(
    database: Database, clock: FakeClock, fake: FakePlatforms
) -> None:
    inbox, port = _Inbox(), free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        rig = outbound_rig(
            database, clock, fake, smtp_host="127.0.0.1", smtp_port=port,
            smtp_starttls=False, email_from="nexus@example.com",
        )  # fmt: skip
        event = message("email:<m1@mail.example>", "email", "ann@example.com", "invoice?")
        rig.arrive(event)
        _answer_rich(rig, _session(rig, "dm:ent_mail"), event, "Your invoice.")
        assert rig.pump() == ["sent"]
    finally:
        controller.stop()
    [mail] = inbox.messages
    body = mail.get_payload(decode=True)
    assert isinstance(body, bytes)
    assert body.decode().replace("\r\n", "\n").strip() == f"Your invoice.\n\n{FALLBACK}"


def test_a_refused_form_is_the_models_to_fix_and_nothing_half_built_is_sent(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message("telegram:1", "telegram", "4242", "choose", message_id="77")
    rig.arrive(event)
    too_long = {"buttons": [{"label": "A", "value": "x" * 65}]}
    _answer_rich(rig, _session(rig, "dm:ent_tg"), event, "Pick one: A or B.", too_long)
    tool_result = rig.rig.model.requests[-1].messages[-1]["content"][0]
    assert tool_result["is_error"] is True
    assert "at most 64 (Telegram's limit)" in tool_result["content"]
    assert rig.pump() == ["sent"]
    [sent] = fake.of("telegram")
    assert "reply_markup" not in sent.body and sent.body["text"] == "Pick one: A or B."


def _slack_press(payload: dict[str, Any]) -> NexusEvent:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    request = InboundRequest(
        "POST", "/v1/inbound/slack",
        {"content-type": "application/x-www-form-urlencoded",
         "x-slack-request-timestamp": "1700000100"},
        body,
    )  # fmt: skip
    [event] = SlackAdapter("secret").parse(request).events
    return event


def _routed(rig: OutboundRig, event: NexusEvent) -> ProcessedEvent:
    """The event stored and routed as the router task does, under the built-in policies."""
    rig.arrive(event)
    with rig.database.unit_of_work() as uow:
        routed = route_one(uow, event.id, load_policies(None), rig.doorbell)
        uow.commit()
    return routed


def test_a_pressed_slack_button_comes_back_into_the_same_session_as_its_value(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    asked = message(
        "slack:Ev1", "slack", "U1", "invoice?", container=Container(kind="channel", id="C1"),
        thread="1700000000.000100", space="T1",
    )  # fmt: skip
    first = _routed(rig, asked)
    session = _session(rig, first.session_label or "", persona="atlas")  # the default policy's
    assert session.id == first.session_id
    _answer_rich(rig, session, asked, "Your invoice.")
    assert rig.pump() == ["sent"]
    [shown] = fake.of("slack")
    [button] = [b for b in shown.body["blocks"][2]["elements"] if b["value"] == "pay"]
    pressed = _slack_press(
        {
            "type": "block_actions",
            "team": {"id": "T1"},
            "user": {"id": "U1", "name": "ann"},
            "trigger_id": "1.2.abc",
            "channel": {"id": "C1"},
            "container": {"type": "message", "channel_id": "C1", "message_ts": "1700000050.1",
                          "thread_ts": "1700000000.000100"},
            "message": {"ts": "1700000050.1", "thread_ts": "1700000000.000100"},
            "actions": [{"type": "button", "action_id": button["action_id"],
                         "value": button["value"]}],
        }
    )  # fmt: skip
    routed = _routed(rig, pressed)
    with rig.database.reading() as uow:
        item = uow.ledger.queue.get(routed.queue_item_id or "")
        stored = uow.ledger.events.get(pressed.id)
    assert routed.disposition == "queued" and routed.session_id == session.id
    # The next turn's question is the queued event's text: the button's value.
    assert item is not None and item.event_id == pressed.id
    assert stored is not None and stored.text == "pay"
    rig.answer(session, pressed, "Paid, thank you.")
    assert rig.pump() == ["sent"]
    answer = fake.of("slack")[-1].body
    assert answer["text"] == "Paid, thank you." and answer["thread_ts"] == "1700000000.000100"
    assert "blocks" not in answer  # a plain answer carries no old buttons


def test_a_pressed_telegram_button_is_answered_in_the_same_chat(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    asked = message("telegram:1", "telegram", "4242", "invoice?", message_id="77")
    first = _routed(rig, asked)
    update = {
        "update_id": 2,
        "callback_query": {
            "id": "cbq1", "data": "later",
            "from": {"id": 4242, "first_name": "4242", "is_bot": False},
            "message": {"message_id": 90, "date": 1700000000,
                        "chat": {"id": 4242, "type": "private"}},
        },
    }  # fmt: skip
    request = InboundRequest("POST", "/v1/inbound/telegram", {}, json.dumps(update).encode())
    [pressed] = TelegramAdapter("secret").parse(request).events
    routed = _routed(rig, pressed)
    with rig.database.reading() as uow:
        item = uow.ledger.queue.get(routed.queue_item_id or "")
        stored = uow.ledger.events.get(pressed.id)
    assert routed.session_id == first.session_id
    assert item is not None and item.event_id == pressed.id
    assert stored is not None and stored.text == "later"


def test_a_pressed_discord_button_is_answered_through_its_own_interaction(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    asked = message(
        "discord:m1", "discord", "9001", "invoice?", container=Container(kind="group", id="C7"),
        message_id="555", space="G1",
    )  # fmt: skip
    first = _routed(rig, asked)
    interaction = {
        "type": 3, "id": "1234567890123456789", "application_id": "APP", "token": "ctoken",
        "guild_id": "G1", "channel_id": "C7", "channel": {"id": "C7", "type": 0},
        "member": {"user": {"id": "9001", "username": "ann"}},
        "data": {"custom_id": "pay", "component_type": 2}, "message": {"id": "777"},
    }  # fmt: skip
    request = InboundRequest("POST", "/v1/inbound/discord", {}, json.dumps(interaction).encode())
    outcome = DiscordAdapter("00" * 32).parse(request)
    # Discord wants an answer within 3 s: "thinking…", which the reply then edits.
    assert outcome.answer is not None and outcome.answer.body == {"type": 5}
    [pressed] = outcome.events
    routed = _routed(rig, pressed)
    with rig.database.reading() as uow:
        stored = uow.ledger.events.get(pressed.id)
    assert routed.session_id == first.session_id
    assert stored is not None and stored.text == "pay"
    session = _session(rig, routed.session_label or "", persona="atlas")
    rig.answer(session, pressed, "Paid.")
    assert rig.pump() == ["sent"]
    [answer] = fake.messages
    assert (answer.kind, answer.path) == (
        "discord_original",
        "/webhooks/APP/ctoken/messages/@original",
    )
    assert answer.body["content"] == "Paid."


def test_a_reaction_on_telegram_is_ignored_and_the_answer_goes_alone(
    rig: OutboundRig, fake: FakePlatforms, database: Database
) -> None:
    event = message("telegram:2", "telegram", "4242", "thanks!", message_id="78")
    rig.arrive(event)
    session = rig.rig.session("dm:ent_tg", persona="assistant", capabilities=("reactions",))
    rig.rig.model.push(CallTools((("react", {"reaction": "love"}),)), Say("Any time."))
    outcome = rig.rig.say(session.id, "thanks!", event_id=event.id)
    assert outcome.status == "committed", outcome
    assert set(rig.pump()) == {"sent"}
    assert [shown(m.body["text"]) for m in fake.of("telegram")] == ["Any time."]
    with database.reading() as uow:
        assert len(uow.ledger.deliveries.for_turn(outcome.turn_id)) == 1
        reply = uow.ledger.events.get(f"reply:{outcome.turn_id}")
    assert reply is not None

    # A reaction alone, where there are no reactions, sends nothing at all.
    rig.rig.model.push(CallTools((("react", {"reaction": "like"}),)), Say("NO_REPLY"))
    quiet = rig.rig.say(session.id, "ok", event_id=event.id)
    assert quiet.status == "committed", quiet
    with database.reading() as uow:
        assert uow.ledger.deliveries.for_turn(quiet.turn_id) == []
        assert uow.ledger.events.get(f"reply:{quiet.turn_id}") is None
