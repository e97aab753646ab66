"""Replies from the Gmail mailbox with `users.messages.send`, in the thread they answer
(threadId, and In-Reply-To and References, which Gmail also wants to thread)."""

from __future__ import annotations

import base64
import re
from email import policy
from email.message import EmailMessage

import httpx

from nexus.adapters.gmail_api import GmailApi, GmailUnavailable
from nexus.adapters.outbound.http import classify, transport_failure
from nexus.ingest.gmail import GmailError
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, RetryLater, SendResult


class GmailSender:
    name = "gmail"

    def __init__(self, api: GmailApi | None) -> None:
        self._api = api

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        return False  # messages.send takes no idempotency key: a second call is a second mail

    def send(self, delivery: DeliveryRecord) -> SendResult:
        if self._api is None:
            return Refused("NEXUS_GMAIL_MAILBOX and NEXUS_GMAIL_CREDENTIAL must be set")
        message = reply_message(delivery, self._api.address)
        raw = base64.urlsafe_b64encode(message.as_bytes(policy=policy.SMTP)).decode("ascii")
        try:
            response = self._api.send_raw(raw, delivery.target.get("thread_id"))
        except GmailUnavailable as error:
            return RetryLater(str(error))
        except GmailError as error:
            return Refused(str(error))  # not configured, or the credential refused: say so
        except httpx.HTTPError as error:
            return transport_failure(error)
        return classify(response, message_id=_gmail_id)


def reply_message(delivery: DeliveryRecord, sender: str) -> EmailMessage:
    """The RFC 822 reply: From the mailbox, threaded under the message it answers."""
    target = delivery.target
    message = EmailMessage()
    message["From"] = sender
    message["To"] = target["to"]
    message["Subject"] = target.get("subject", "Re: your message")
    # Deterministic, as the SMTP sender's: a receiver that deduplicates on it can.
    local = re.sub(r"[^A-Za-z0-9._-]", ".", delivery.idempotency_key or delivery.id)
    message["Message-ID"] = f"<{local}@{sender.rsplit('@', 1)[-1]}>"
    if target.get("in_reply_to"):
        original = f"<{str(target['in_reply_to']).strip('<>')}>"
        message["In-Reply-To"] = original
        message["References"] = target.get("references") or original
    message.set_content(delivery.text)
    return message


def _gmail_id(body: object) -> str | None:
    found = body.get("id") if isinstance(body, dict) else None
    return str(found) if found is not None else None
