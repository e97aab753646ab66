"""WhatsApp rich replies through the real sender and the fake Cloud API (which refuses what
the real one refuses): choices as reply buttons or a list, beyond that numbered lines, and
an OGG/Opus attachment as a voice note after the text. The bodies are those recorded in
tests/fixtures/whatsapp/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nexus.adapters.scripted import CallTools, Say
from tests.contract.outbound_support import OutboundRig, fake, message, rig
from tests.fakes.platform_server import FakePlatforms

__all__ = ["fake", "rig"]  # the fixtures, for pytest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "whatsapp"
TO = "972987654321"


def _fixture(name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return found


def _answer(rig: OutboundRig, text: str, options: dict[str, Any], n: int = 1) -> str:
    event = message(f"whatsapp:wamid.in{n}", "whatsapp", TO, "well?", space="PHONE_ID")
    rig.arrive(event)
    session = rig.rig.session(f"dm:wa{n}", persona="assistant", capabilities=("rich_replies",))
    rig.rig.model.push(CallTools((("present_options", options),)), Say(text))
    outcome = rig.rig.say(session.id, event.text or "", event_id=event.id)
    assert outcome.status == "committed", outcome
    return outcome.turn_id


def _choices(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"buttons": [{"label": label, "value": value} for label, value in pairs]}


def test_two_choices_are_reply_buttons_under_the_answer(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    _answer(rig, "Your invoice.", _choices(("Pay now", "pay"), ("Later", "later")))
    assert rig.pump() == ["sent"]
    [sent] = fake.of("whatsapp")
    assert sent.path == "/PHONE_ID/messages"
    assert sent.body == _fixture("send_interactive_button.json")


def test_more_choices_than_buttons_are_a_list(rig: OutboundRig, fake: FakePlatforms) -> None:
    days = [("Monday", "mon"), ("Tuesday", "tue"), ("Wednesday", "wed"), ("Thursday", "thu")]
    _answer(rig, "Pick a slot.", _choices(*days))
    assert rig.pump() == ["sent"]
    [sent] = fake.of("whatsapp")
    assert sent.body == _fixture("send_interactive_list.json")


def test_an_answer_too_long_for_buttons_puts_its_choices_in_a_list(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    _answer(rig, "word " * 300, _choices(("Yes", "y"), ("No", "n")))
    assert rig.pump() == ["sent"]
    [sent] = fake.of("whatsapp")
    interactive = sent.body["interactive"]
    assert interactive["type"] == "list" and len(interactive["body"]["text"]) > 1024


def test_beyond_the_platforms_limits_the_choices_are_numbered_lines(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    many = [(f"Option {n}", f"o{n}") for n in range(1, 12)]  # eleven: more than a list holds
    long_label = [("A label far longer than a list row may be", "long")]
    rows = [[{"label": a, "value": b} for a, b in many[i : i + 5]] for i in range(0, 11, 5)]
    _answer(rig, "Choose.", {"buttons": rows}, n=1)
    _answer(rig, "Choose.", _choices(*long_label), n=2)
    assert rig.pump() == ["sent", "sent"]
    first, second = fake.of("whatsapp")
    assert first.body["type"] == "text" and second.body["type"] == "text"
    lines = "\n".join(f"{n}. Option {n}" for n in range(1, 12))
    assert first.body["text"]["body"] == f"Choose.\n\nReply with one of:\n{lines}"
    assert second.body["text"]["body"].endswith("1. A label far longer than a list row may be")


def test_link_buttons_stay_lines_beside_the_reply_buttons(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    link = {"label": "Invoice PDF", "url": "https://example.com/i/42.pdf"}
    options = {"buttons": [[{"label": "Pay now", "value": "pay"}], [link]]}
    _answer(rig, "Your invoice.", options)
    assert rig.pump() == ["sent"]
    [sent] = fake.of("whatsapp")
    body = sent.body["interactive"]["body"]["text"]
    assert body == "Your invoice.\n\nInvoice PDF: https://example.com/i/42.pdf"
    assert sent.body["interactive"]["action"]["buttons"] == [
        {"type": "reply", "reply": {"id": "pay", "title": "Pay now"}}
    ]


def test_an_ogg_attachment_follows_the_text_as_a_voice_note(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    voice = {"url": "https://example.com/notes/reply.ogg", "kind": "audio", "name": "reply.ogg"}
    song = {"url": "https://example.com/song.mp3", "kind": "audio", "mime_type": "audio/mpeg"}
    turn_id = _answer(rig, "Here is my answer, spoken.", {"attachments": [voice, song]})
    assert rig.pump() == ["sent", "sent", "sent"]
    text, note, audio = fake.of("whatsapp")
    assert text.body["text"]["body"] == "Here is my answer, spoken."
    assert note.body == _fixture("send_voice_note.json")
    assert audio.body["audio"] == {"link": "https://example.com/song.mp3"}  # not a voice note
    deliveries = rig.deliveries(turn_id)
    assert [d.chunk_index for d in deliveries] == [0, 1, 2]
    assert [d.provider_message_id for d in deliveries] == ["wamid.1000", "wamid.1001", "wamid.1002"]


def test_elsewhere_an_attachment_is_a_link_in_the_text(
    rig: OutboundRig, fake: FakePlatforms
) -> None:
    event = message("telegram:9", "telegram", "4242", "say it", message_id="7")
    rig.arrive(event)
    session = rig.rig.session("dm:tg", persona="assistant", capabilities=("rich_replies",))
    voice = {"url": "https://example.com/notes/reply.ogg", "kind": "audio", "name": "reply.ogg"}
    rig.rig.model.push(CallTools((("present_options", {"attachments": [voice]}),)), Say("Spoken."))
    assert rig.rig.say(session.id, "say it", event_id=event.id).status == "committed"
    assert rig.pump() == ["sent"]
    [sent] = fake.of("telegram")
    assert sent.body["text"] == "Spoken.\n\nreply.ogg: https://example.com/notes/reply.ogg"
