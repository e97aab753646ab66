"""Telegram Bot API `sendMessage`: HTML markup, forum topics, reply to the first message."""

from __future__ import annotations

from typing import Any

from nexus.adapters.outbound.http import ApiSender, classify, id_at
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import SendResult


class TelegramSender(ApiSender):
    """The Bot API takes no idempotency key: a resend may post twice."""

    name = "telegram"
    configured_by = "NEXUS_TELEGRAM_BOT_TOKEN"

    def _send(self, delivery: DeliveryRecord, token: str) -> SendResult:
        target = delivery.target
        body: dict[str, Any] = {
            "chat_id": target["chat_id"],
            "text": delivery.text,
            "link_preview_options": {"is_disabled": True},
        }
        if target.get("parse_mode"):
            body["parse_mode"] = target["parse_mode"]
        if target.get("message_thread_id") is not None:
            body["message_thread_id"] = target["message_thread_id"]
        if target.get("reply_markup"):
            body["reply_markup"] = target["reply_markup"]  # an inline keyboard, last chunk only
        if target.get("reply_to"):
            # If the message was deleted meanwhile, answer anyway rather than fail.
            body["reply_parameters"] = {
                "message_id": int(target["reply_to"]),
                "allow_sending_without_reply": True,
            }
        response = self._client.post(f"{self._base}/bot{token}/sendMessage", json=body)
        return classify(response, message_id=id_at("result", "message_id"))
