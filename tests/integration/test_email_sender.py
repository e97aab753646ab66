"""The email sender against a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from nexus.adapters.outbound.email import EmailSender
from nexus.ledger.enums import DeliveryStatus
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, RetryLater, Sent
from tests.support import free_port


class Inbox:
    """An SMTP handler that keeps what it accepts and refuses the recipients it is told to."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.answers: dict[str, str] = {}  # recipient → SMTP answer to RCPT TO

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if address in self.answers:
            return self.answers[address]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    inbox = Inbox()
    # aiosmtpd checks it is up by connecting to the port it was given, so it needs a real one.
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()


def _delivery(to: str) -> DeliveryRecord:
    return DeliveryRecord(
        id="01DELIVERY", turn_id="01TURN", chunk_index=0, session_id="01SESSION",
        event_id="reply:01TURN", platform="email",
        target={"to": to, "subject": "Re: Invoice", "in_reply_to": "<orig@mail.example>"},
        text="Here is the invoice you asked for.", status=DeliveryStatus.SENDING, attempts=1,
        idempotency_key="01TURN:0", provider_message_id=None, error=None,
        next_attempt_at=None, created_at=0, updated_at=0,
    )  # fmt: skip


def test_an_email_reply_is_threaded_under_the_message_it_answers(
    smtp: tuple[Inbox, int],
) -> None:
    inbox, port = smtp
    sender = EmailSender(host="127.0.0.1", port=port, sender="nexus@bot.example", starttls=False)
    result = sender.send(_delivery("mom@gmail.com"))
    assert result == Sent("<01TURN.0@bot.example>")
    [mail] = inbox.messages
    assert mail["To"] == "mom@gmail.com" and mail["From"] == "nexus@bot.example"
    assert mail["Subject"] == "Re: Invoice"
    assert mail["In-Reply-To"] == "<orig@mail.example>" == mail["References"]
    assert mail["Message-ID"] == "<01TURN.0@bot.example>"
    body = mail.get_payload(decode=True)
    assert isinstance(body, bytes)
    assert body.decode().strip() == "Here is the invoice you asked for."


def test_smtp_refusals_are_final_and_temporary_failures_are_retried(
    smtp: tuple[Inbox, int],
) -> None:
    inbox, port = smtp
    inbox.answers = {"gone@x.example": "550 No such user", "busy@x.example": "451 Try later"}
    sender = EmailSender(host="127.0.0.1", port=port, sender="nexus@bot.example", starttls=False)
    assert isinstance(sender.send(_delivery("gone@x.example")), Refused)
    assert isinstance(sender.send(_delivery("busy@x.example")), RetryLater)
    unconfigured = EmailSender(host=None, port=25, sender=None)
    assert unconfigured.send(_delivery("a@b.c")) == Refused(
        "NEXUS_SMTP_HOST and NEXUS_EMAIL_FROM must be set"
    )
    assert inbox.messages == []
