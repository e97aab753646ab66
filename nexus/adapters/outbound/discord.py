"""Discord: interaction follow-ups (edit the "thinking…" answer, then follow up) or channel
messages with an enforced nonce, which Discord uses to drop a duplicate."""

from __future__ import annotations

from typing import Any

import httpx

from nexus.adapters.outbound.http import ApiSender, classify, id_at, short_hash, transport_failure
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, SendResult

# The model's text must not ping @everyone or a role because a user asked it to.
NO_MENTIONS: dict[str, Any] = {"parse": []}


class DiscordSender(ApiSender):
    name = "discord"
    configured_by = "NEXUS_DISCORD_BOT_TOKEN"

    def idempotent(self, delivery: DeliveryRecord) -> bool:
        # Editing the original answer twice leaves one message; a channel message carries an
        # enforced nonce. Only an interaction's further follow-ups have no such guard.
        return "interaction" not in delivery.target or delivery.chunk_index == 0

    def send(self, delivery: DeliveryRecord) -> SendResult:
        try:
            if "interaction" in delivery.target:
                return self._follow_up(delivery)
            return self._channel_message(delivery)
        except httpx.HTTPError as error:
            return transport_failure(error)

    def _follow_up(self, delivery: DeliveryRecord) -> SendResult:
        interaction = delivery.target["interaction"]
        webhook = f"{self._base}/webhooks/{interaction['application_id']}/{interaction['token']}"
        body = {"content": delivery.text, "allowed_mentions": NO_MENTIONS, **_rich(delivery)}
        if delivery.chunk_index == 0:
            response = self._client.patch(f"{webhook}/messages/@original", json=body)
        else:
            response = self._client.post(webhook, params={"wait": "true"}, json=body)
        return classify(response, message_id=id_at("id"))

    def _channel_message(self, delivery: DeliveryRecord) -> SendResult:
        if not self._token:
            return Refused(f"{self.configured_by} is not set")
        body: dict[str, Any] = {
            "content": delivery.text,
            "allowed_mentions": NO_MENTIONS,
            # The same nonce within a few minutes returns the message already created.
            "nonce": short_hash(delivery.idempotency_key or delivery.id),
            "enforce_nonce": True,
            **_rich(delivery),
        }
        if delivery.target.get("reply_to"):
            body["message_reference"] = {
                "message_id": delivery.target["reply_to"],
                "fail_if_not_exists": False,
            }
        response = self._client.post(
            f"{self._base}/channels/{delivery.target['channel_id']}/messages",
            json=body,
            headers={"Authorization": f"Bot {self._token}"},
        )
        return classify(response, message_id=id_at("id"))


def _rich(delivery: DeliveryRecord) -> dict[str, Any]:
    """Embeds and buttons (the last chunk of a rich reply)."""
    return {key: delivery.target[key] for key in ("embeds", "components") if key in delivery.target}
