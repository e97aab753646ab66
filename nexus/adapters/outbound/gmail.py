"""Replies from the Gmail mailbox with `users.messages.send`, in the thread they answer
(threadId, and In-Reply-To and References, which Gmail also wants to thread)."""

from __future__ import annotations

import base64
from email import policy

import httpx

from nexus.adapters.gmail_api import GmailApi, GmailUnavailable
from nexus.adapters.outbound.email import reply_message
from nexus.adapters.outbound.http import classify, id_at, transport_failure
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
        return classify(response, message_id=id_at("id"))
