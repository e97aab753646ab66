"""WhatsApp Cloud API messages: text, a reply context on the first chunk; the wamid it
returns is what status webhooks later name. A chunk whose target carries `interactive`
(reply buttons or a list, nexus.outbound.rich) is sent as an interactive message with the
chunk's text as its body; one that carries `media` is a media message by link (an OGG/Opus
audio file as a voice note, `"voice": true`)."""

from __future__ import annotations

from typing import Any

from nexus.adapters.outbound.http import ApiSender, classify, id_at
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import SendResult


class WhatsAppSender(ApiSender):
    """The Cloud API takes no idempotency key: a resend may post twice."""

    name = "whatsapp"
    configured_by = "NEXUS_WHATSAPP_ACCESS_TOKEN"

    def _send(self, delivery: DeliveryRecord, token: str) -> SendResult:
        target = delivery.target
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": target["to"],
            **_content(delivery),
        }
        if target.get("reply_to"):
            body["context"] = {"message_id": target["reply_to"]}
        response = self._client.post(
            f"{self._base}/{target['phone_number_id']}/messages",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        return classify(response, message_id=id_at("messages", 0, "id"))


def _content(delivery: DeliveryRecord) -> dict[str, Any]:
    """The message's `type` and its object: text, interactive, or media by link."""
    target = delivery.target
    media = target.get("media")
    if isinstance(media, dict):
        kind = str(media["type"])
        return {"type": kind, kind: {k: v for k, v in media.items() if k != "type"}}
    interactive = target.get("interactive")
    if isinstance(interactive, dict):
        return {
            "type": "interactive",
            "interactive": {**interactive, "body": {"text": delivery.text}},
        }
    return {"type": "text", "text": {"body": delivery.text, "preview_url": False}}
