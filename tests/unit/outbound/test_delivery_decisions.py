"""Pure outbound decisions: retry waits, GCRA slots, addresses, what an HTTP answer means."""

from __future__ import annotations

import httpx
import pytest

from nexus.adapters.outbound.http import classify, retry_after_ms
from nexus.ledger.records import EventRecord
from nexus.outbound.addressing import address_for
from nexus.outbound.ports import Refused, RetryLater, Sent
from nexus.outbound.rate_limit import gcra
from nexus.outbound.retry import RetryPolicy


def test_backoff_doubles_from_one_second_to_thirty_and_gives_up_after_three() -> None:
    policy = RetryPolicy()
    assert [policy.delay_ms(n) for n in (1, 2, 3)] == [1_000, 2_000, None]
    long = RetryPolicy(max_attempts=10)
    assert [long.delay_ms(n) for n in range(1, 10)] == [
        1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000,
    ]  # fmt: skip


def test_the_platforms_retry_after_wins_over_a_shorter_backoff() -> None:
    policy = RetryPolicy()
    assert policy.delay_ms(1, retry_after_ms=7_000) == 7_000
    assert policy.delay_ms(2, retry_after_ms=500) == 2_000
    assert policy.delay_ms(3, retry_after_ms=1) is None  # attempts are spent regardless


def test_gcra_allows_a_burst_then_spaces_sends_by_the_rate() -> None:
    tat, waits = None, []
    for _ in range(5):  # 5 sends at the same instant, 2 per second, burst 3
        wait, tat = gcra(tat, 0.0, 500.0, burst=3)
        waits.append(wait)
    assert waits == [0, 0, 0, 500, 1_000]
    wait, _ = gcra(tat, 10_000.0, 500.0, burst=3)  # long idle: the schedule has caught up
    assert wait == 0


def _event(adapter: str, **fields: object) -> EventRecord:
    base: dict[str, object] = {
        "id": f"{adapter}:1", "adapter": adapter, "platform": adapter, "kind": "message",
        "direction": "inbound", "source": None, "space": None, "sender_id": "u1",
        "sender_name": None, "contact_id": None, "container_kind": "dm", "container_id": "c1",
        "platform_thread_id": None, "text": "hi", "reply_to": None, "message_id": None,
        "occurred_at": 0, "received_at": 0, "status": "processed", "disposition": None,
        "disposition_detail": None,
    }  # fmt: skip
    return EventRecord.model_validate({**base, **fields})


def test_addresses_follow_the_inbound_delivery_context() -> None:
    topic = address_for(_event("telegram", platform_thread_id="42", message_id="9"), {})
    assert topic is not None
    assert topic.target == {"chat_id": "c1", "message_thread_id": 42} and topic.reply_to == "9"
    sms = address_for(_event("twilio", sender_id="+1555", space="+1800"), {})
    assert sms is not None and sms.format == "sms"
    assert sms.target == {"to": "+1555", "from": "+1800"}
    mail = address_for(_event("email", sender_id="a@b.c", message_id="<m1@x>"), {"subject": "Hi"})
    assert mail is not None
    assert mail.target == {"to": "a@b.c", "subject": "Re: Hi", "in_reply_to": "<m1@x>"}
    # A Message-ID too long for the ledger's column is stored bounded: the reply threads on
    # the whole one, kept in the payload.
    whole = "x" * 300 + "@example.com"
    bounded = _event("email", sender_id="a@b.c", message_id="x" * 180 + "#sha256:abc")
    long_mail = address_for(bounded, {"subject": "Hi", "message_id": whole})
    assert long_mail is not None and long_mail.target["in_reply_to"] == whole
    assert address_for(_event("github"), {}) is None  # no way to answer
    assert address_for(_event("whatsapp"), {}) is None  # no phone number id to send from
    group = "iMessage;+;chat912345678901234567"
    imessage = address_for(_event("bluebubbles", platform="imessage", container_id=group), {})
    assert imessage is not None
    assert (imessage.sender, imessage.format) == ("bluebubbles", "imessage")
    assert imessage.target == {"chat_guid": group} and imessage.reply_to is None
    assert address_for(_event("bluebubbles", container_id=None), {}) is None  # no chat


def _response(status: int, json: object = None, **headers: str) -> httpx.Response:
    request = httpx.Request("POST", "http://platform.test/send")
    return httpx.Response(status, json=json, headers=headers, request=request)


def test_http_answers_mean_sent_retry_or_refused() -> None:
    assert classify(_response(200, {"id": "m1"}), message_id=lambda b: b["id"]) == Sent("m1")
    limited = classify(_response(429, {"message": "slow down"}, **{"Retry-After": "3"}),
                       message_id=lambda b: None)  # fmt: skip
    assert limited == RetryLater("HTTP 429: slow down", 3_000)
    assert isinstance(classify(_response(503), message_id=lambda b: None), RetryLater)
    for status in (400, 401, 403, 404):
        assert isinstance(classify(_response(status), message_id=lambda b: None), Refused)


@pytest.mark.parametrize(
    ("body", "headers", "expected"),
    [
        ({"parameters": {"retry_after": 4}}, {}, 4_000),  # Telegram
        ({"retry_after": 1.5, "global": False}, {}, 1_500),  # Discord
        (None, {"Retry-After": "2"}, 2_000),  # Slack, Twilio
        (None, {"Retry-After": "soon"}, None),
        (None, {}, None),
    ],
)
def test_retry_after_is_read_from_the_body_or_the_header(
    body: object, headers: dict[str, str], expected: int | None
) -> None:
    assert retry_after_ms(_response(429, body, **headers), body) == expected
