"""Replies to the generic webhook adapter: a POST signed per Standard Webhooks, with the
delivery's id as `webhook-id`, which the spec tells receivers to deduplicate on."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
from standardwebhooks.webhooks import Webhook

from nexus.adapters.outbound.http import classify, new_client, transport_failure
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, SendResult

REPLY_TYPE = "nexus.reply"


class WebhookSender:
    name = "webhook"

    def __init__(self, url: str | None, secret: str | None, client: httpx.Client | None = None):
        self._url = url
        self._secret = secret
        self._client = client or new_client()

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        return True  # the same webhook-id on every attempt

    def send(self, delivery: DeliveryRecord) -> SendResult:
        if not self._url or not self._secret:
            return Refused("NEXUS_WEBHOOK_REPLY_URL and NEXUS_WEBHOOK_SECRET must be set")
        body = json.dumps(
            {
                "type": REPLY_TYPE,
                "data": {
                    "turn_id": delivery.turn_id,
                    "chunk": delivery.chunk_index,
                    "in_reply_to": delivery.target.get("in_reply_to"),
                    "text": delivery.text,
                    **({"rich": delivery.target["rich"]} if "rich" in delivery.target else {}),
                },
            },
            separators=(",", ":"),
        )
        now = datetime.now(UTC)
        message_id = f"msg_{delivery.idempotency_key or delivery.id}"
        headers = {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": Webhook(self._secret).sign(message_id, now, body),
        }
        try:
            response = self._client.post(self._url, content=body, headers=headers)
        except httpx.HTTPError as error:
            return transport_failure(error)
        return classify(response, message_id=lambda _: message_id)
