"""Where a running turn shows "typing…" (pure), and the BlueBubbles sender's typing and
tapbacks over real HTTP to the loopback fake server."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from nexus.adapters.outbound.bluebubbles import BlueBubblesClient, BlueBubblesSender
from nexus.adapters.outbound.telegram import TelegramSender
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord, EventRecord
from nexus.outbound.ports import Refused, SendResult, Sent
from nexus.outbound.typing import Typing, TypingIndicator, TypingSender, typing_for
from tests.fakes.bluebubbles_server import FakeBlueBubbles

PASSWORD = "pw"
CHAT = "iMessage;+;chat912345678901234567"


def _event(adapter: str, container: str | None = CHAT, direction: str = "inbound") -> EventRecord:
    return EventRecord(
        id=f"{adapter}:1",
        adapter=adapter,
        platform=adapter,
        kind="message",
        direction=direction,
        source=None,
        space=None,
        sender_id="+15550001",
        sender_name=None,
        contact_id=None,
        container_kind="group",
        container_id=container,
        platform_thread_id=None,
        text="hi",
        reply_to=None,
        message_id="MSG-1",
        occurred_at=0,
        received_at=0,
        status="done",
        disposition=None,
        disposition_detail=None,
    )


@pytest.fixture
def fake() -> Iterator[FakeBlueBubbles]:
    with FakeBlueBubbles(PASSWORD) as server:
        yield server


def _senders(fake: FakeBlueBubbles) -> dict[str, object]:
    return {
        "bluebubbles": BlueBubblesSender(BlueBubblesClient(fake.url, PASSWORD)),
        "telegram": TelegramSender("token", "http://127.0.0.1:9"),
    }


def test_typing_shows_in_the_chat_the_answer_goes_to(fake: FakeBlueBubbles) -> None:
    found = typing_for(_event("bluebubbles"), _senders(fake))
    assert found == Typing("bluebubbles", {"chat_guid": CHAT})


def test_no_typing_without_a_sender_that_has_it_or_a_chat(fake: FakeBlueBubbles) -> None:
    senders = _senders(fake)
    assert not isinstance(senders["telegram"], TypingSender)
    assert typing_for(_event("telegram", "42"), senders) is None
    assert typing_for(_event("bluebubbles", None), senders) is None
    assert typing_for(_event("bluebubbles", direction="outbound"), senders) is None
    assert typing_for(_event("api"), senders) is None
    assert typing_for(None, senders) is None


def test_on_then_off_reach_the_chat_in_order(fake: FakeBlueBubbles) -> None:
    senders = _senders(fake)
    indicator = TypingIndicator(lambda: senders)
    shown = indicator.started(_event("bluebubbles"))
    indicator.stopped(shown)
    indicator.flush()
    assert [(c.method, c.chat) for c in fake.of("typing")] == [("POST", CHAT), ("DELETE", CHAT)]


class _Broken:
    name = "bluebubbles"

    def typing(self, target: Mapping[str, Any], *, on: bool) -> SendResult:
        raise RuntimeError("a bug in a sender")


def test_a_sender_that_raises_does_not_stop_the_thread(fake: FakeBlueBubbles) -> None:
    senders: dict[str, object] = {"bluebubbles": _Broken()}
    indicator = TypingIndicator(lambda: senders)
    indicator.stopped(indicator.started(_event("bluebubbles")))
    indicator.flush()
    senders.update(_senders(fake))
    indicator.stopped(indicator.started(_event("bluebubbles")))
    indicator.flush()
    assert len(fake.of("typing")) == 2


def _delivery(target: dict[str, Any]) -> DeliveryRecord:
    return DeliveryRecord(
        id="dlv_1",
        turn_id="turn_1",
        chunk_index=1,
        session_id="ses_1",
        event_id="reply:turn_1",
        platform="bluebubbles",
        target=target,
        text="[love]",
        idempotency_key="turn_1:1",
        status=DeliveryStatus.SENDING,
        attempts=1,
        next_attempt_at=0,
        provider_message_id=None,
        error=None,
        created_at=0,
        updated_at=0,
    )


def test_a_tapback_delivery_reacts_on_the_message_answered(fake: FakeBlueBubbles) -> None:
    sender = BlueBubblesSender(BlueBubblesClient(fake.url, PASSWORD))
    tapback = {"message_guid": "MSG-1", "reaction": "love"}
    assert isinstance(sender.send(_delivery({"chat_guid": CHAT, "tapback": tapback})), Sent)
    [call] = fake.of("react")
    assert call.body == {"chatGuid": CHAT, "selectedMessageGuid": "MSG-1", "reaction": "love"}
    assert fake.texts() == []
    wrong = {"message_guid": "MSG-1", "reaction": "wow"}
    refused = sender.send(_delivery({"chat_guid": CHAT, "tapback": wrong}))
    assert isinstance(refused, Refused) and "not a tapback" in refused.error
    assert len(fake.of("react")) == 1
