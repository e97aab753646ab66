"""Gmail's pure parts: the push's token and envelope, a raw message as an event, the reply's
address and headers, and when the watch is due."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from nexus.adapters.gmail_api import read_oauth_client
from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.gmail import GmailPushAdapter, message_event, push_event
from nexus.adapters.outbound.email import reply_message
from nexus.ingest.gmail import GmailError
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord, EventRecord
from nexus.outbound.addressing import address_for
from nexus.timer.gmail_watch import DAY_MS, watch_due

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gmail"
MAILBOX = "bot@example.com"


def _fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return loaded


def _push(query: dict[str, str], body: dict[str, Any] | None = None) -> InboundRequest:
    data = json.dumps(body or _fixture("pubsub_push.json")).encode()
    return InboundRequest(
        method="POST",
        url="https://bot.example.com/v1/inbound/gmail",
        headers={"content-type": "application/json"},
        body=data,
        query=query,
    )


# --- the push ---------------------------------------------------------------------------------


def test_a_push_with_the_configured_token_is_accepted() -> None:
    GmailPushAdapter("push-secret", MAILBOX).verify(_push({"token": "push-secret"}), now_ms=0)


@pytest.mark.parametrize(
    ("token", "query", "says"),
    [
        ("push-secret", {"token": "push-secreT"}, "does not match"),
        ("push-secret", {"token": "push-secret-and-more"}, "does not match"),
        ("push-secret", {}, "missing ?token="),
        (None, {"token": "anything"}, "NEXUS_GMAIL_PUSH_TOKEN is not set"),
    ],
)
def test_a_push_without_the_right_token_is_refused(
    token: str | None, query: dict[str, str], says: str
) -> None:
    with pytest.raises(SignatureRejected, match=says.replace("?", r"\?")):
        GmailPushAdapter(token, MAILBOX).verify(_push(query), now_ms=0)


def test_the_recorded_push_becomes_a_record_that_is_never_a_turn() -> None:
    event = push_event(_fixture("pubsub_push.json"), "user@example.com")
    assert event.id == "gmail:push:2070443601311540"
    assert (event.adapter, event.platform, event.kind) == ("gmail", "email", "system")
    assert not event.routable
    assert event.raw["email_address"] == "user@example.com"
    assert event.raw["history_id"] == "1234567890"
    assert event.raw["subscription"] == "projects/myproject/subscriptions/mysubscription"
    assert event.occurred_at == 1_614_366_835_749  # publishTime


def test_a_push_with_a_numeric_history_id_and_pubsubs_other_spelling_is_read() -> None:
    data = base64.b64encode(b'{"emailAddress": "Bot@Example.com", "historyId": 9876543210}')
    envelope = {"message": {"data": data.decode(), "message_id": "42"}, "subscription": "s"}
    event = push_event(envelope, MAILBOX)
    assert event.id == "gmail:push:42" and event.raw["history_id"] == "9876543210"
    assert event.raw["email_address"] == MAILBOX
    assert "not the configured mailbox" not in (event.ignore_reason or "")


def test_a_push_for_another_mailbox_is_recorded_as_such() -> None:
    event = push_event(_fixture("pubsub_push.json"), MAILBOX)
    assert "not the configured mailbox" in (event.ignore_reason or "")


@pytest.mark.parametrize(
    "envelope",
    [
        {"subscription": "s"},
        {"message": {"data": "e30=", "messageId": ""}},
        {"message": {"messageId": "1"}},
        {"message": {"messageId": "1", "data": "not base64!"}},
        {"message": {"messageId": "1", "data": base64.b64encode(b"[1]").decode()}},
        {"message": {"messageId": "1", "data": base64.b64encode(b'{"historyId": 1}').decode()}},
    ],
)
def test_a_malformed_push_is_a_clear_400(envelope: dict[str, Any]) -> None:
    with pytest.raises(MalformedRequest):
        push_event(envelope, MAILBOX)


# --- a message --------------------------------------------------------------------------------


def test_the_recorded_raw_message_becomes_an_event_keyed_by_its_gmail_id() -> None:
    event = message_event(_fixture("messages_get_raw.json"), MAILBOX)
    assert event.id == "gmail:18c9f2a4b7e3d001"
    assert (event.adapter, event.platform, event.kind) == ("gmail", "email", "message")
    assert event.routable
    assert event.sender is not None and event.sender.id == "ada@example.org"
    assert event.sender.display_name == "Ada Lovelace"
    assert event.platform_thread_id == "18c9f1e0a2b4c000"  # Gmail's thread, not References
    assert event.occurred_at == 1_767_286_800_000  # internalDate
    assert event.text == "Yes, 7pm works. Shall I book the table?"  # quoted history cut
    assert event.message_id == "CAJ8x+Lq2N0fake0msg1@mail.gmail.com"
    assert event.raw["subject"] == "Re: Dinner on Friday?"
    assert event.raw["headers"]["references"] == "<CAJ8x+Lq2N0fake0root@mail.gmail.com>"
    assert "raw" not in event.raw  # never the MIME bytes


@pytest.mark.parametrize(
    ("labels", "sender"),
    [(["SENT"], "ada@example.org"), (["DRAFT"], "ada@example.org"), (["INBOX"], MAILBOX)],
)
def test_mail_the_mailbox_wrote_itself_is_never_answered(labels: list[str], sender: str) -> None:
    resource = _fixture("messages_get_raw.json")
    raw = base64.urlsafe_b64decode(resource["raw"]).replace(
        b"From: Ada Lovelace <ada@example.org>", f"From: Nexus <{sender.upper()}>".encode()
    )
    resource.update(labelIds=labels, raw=base64.urlsafe_b64encode(raw).decode())
    event = message_event(resource, MAILBOX)
    assert event.kind == "bot_echo" and not event.routable
    assert "written by this mailbox" in (event.ignore_reason or "")


def test_a_message_without_raw_is_a_clear_error() -> None:
    with pytest.raises(MalformedRequest, match="format=raw"):
        message_event({"id": "1", "payload": {}}, MAILBOX)


# --- the reply --------------------------------------------------------------------------------


def _record(event_payload: dict[str, Any]) -> EventRecord:
    event = message_event(event_payload, MAILBOX)
    return EventRecord.model_validate(
        {
            **{name: None for name in EventRecord.model_fields},
            "id": event.id,
            "adapter": event.adapter,
            "platform": event.platform,
            "kind": event.kind,
            "direction": "inbound",
            "source": "human",
            "sender_id": event.sender.id if event.sender else None,
            "container_kind": "dm",
            "container_id": event.sender.id if event.sender else None,
            "platform_thread_id": event.platform_thread_id,
            "message_id": event.message_id,
            "occurred_at": event.occurred_at,
            "received_at": 0,
            "status": "processed",
            "attachments": [],
        }
    )


def test_a_gmail_message_is_answered_by_the_gmail_sender_in_its_thread() -> None:
    resource = _fixture("messages_get_raw.json")
    payload = message_event(resource, MAILBOX).raw
    address = address_for(_record(resource), payload)
    assert address is not None
    assert (address.sender, address.format) == ("gmail", "email")
    assert address.target == {
        "to": "ada@example.org",
        "subject": "Re: Dinner on Friday?",  # not "Re: Re: …"
        "in_reply_to": "CAJ8x+Lq2N0fake0msg1@mail.gmail.com",
        "references": "<CAJ8x+Lq2N0fake0root@mail.gmail.com> <CAJ8x+Lq2N0fake0msg1@mail.gmail.com>",
        "thread_id": "18c9f1e0a2b4c000",
    }


def test_the_reply_is_threaded_under_the_message_it_answers() -> None:
    delivery = DeliveryRecord(
        id="01DELIVERY", turn_id="01TURN", chunk_index=0, session_id="01SESSION",
        event_id="reply:01TURN", platform="gmail",
        target={"to": "ada@example.org", "subject": "Re: Dinner", "in_reply_to": "m1@x",
                "references": "<root@x> <m1@x>", "thread_id": "t1"},
        text="Booked for 7pm.", status=DeliveryStatus.SENDING, attempts=1,
        idempotency_key="01TURN:0", provider_message_id=None, error=None,
        next_attempt_at=None, created_at=0, updated_at=0,
    )  # fmt: skip
    message = reply_message(delivery, MAILBOX)
    assert message["From"] == MAILBOX and message["To"] == "ada@example.org"
    assert message["Subject"] == "Re: Dinner"
    assert message["In-Reply-To"] == "<m1@x>"
    assert message["References"] == "<root@x> <m1@x>"
    assert message["Message-ID"] == "<01TURN.0@example.com>"
    assert message.get_content().strip() == "Booked for 7pm."


# --- the watch and the credential -------------------------------------------------------------


NOW = 1_767_225_600_000


@pytest.mark.parametrize(
    ("expires_at", "due"),
    [
        (None, True),  # never watched
        (NOW + 7 * DAY_MS, False),  # just renewed
        (NOW + DAY_MS + 1, False),  # a day and a moment left
        (NOW + DAY_MS - 1, True),  # less than a day left
        (NOW - 1, True),  # lapsed
    ],
)
def test_the_watch_is_renewed_when_less_than_a_day_is_left(
    expires_at: int | None, due: bool
) -> None:
    assert watch_due(expires_at, NOW) is due


def test_the_oauth_credential_is_json_with_three_fields_and_never_shown() -> None:
    value = json.dumps({"client_id": "c", "client_secret": "s3cret-xyz", "refresh_token": "r-tok"})
    client = read_oauth_client("gmail", value)
    assert client.refresh_token == "r-tok"
    assert "s3cret-xyz" not in repr(client) and "r-tok" not in repr(client)
    with pytest.raises(GmailError, match="lacks refresh_token"):
        read_oauth_client("gmail", json.dumps({"client_id": "c", "client_secret": "s"}))
    with pytest.raises(GmailError, match="not JSON") as refused:
        read_oauth_client("gmail", "s3cret-xyz")
    assert "s3cret-xyz" not in str(refused.value)
