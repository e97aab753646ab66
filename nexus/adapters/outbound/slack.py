"""Slack `chat.postMessage`: mrkdwn, threads by `thread_ts`; Slack's errors come in a 200."""

from __future__ import annotations

from typing import Any

from nexus.adapters.outbound.http import ApiSender, classify, id_at, json_or_none, retry_after_ms
from nexus.ledger.records import DeliveryRecord
from nexus.outbound.ports import Refused, RetryLater, SendResult, Sent

# Slack says these are temporary; every other `ok: false` error is about the request.
_TRANSIENT = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable",
                        "request_timeout"})  # fmt: skip


class SlackSender(ApiSender):
    """chat.postMessage has no idempotency key: a resend may post twice."""

    name = "slack"
    configured_by = "NEXUS_SLACK_BOT_TOKEN"

    def _send(self, delivery: DeliveryRecord, token: str) -> SendResult:
        body: dict[str, Any] = {
            "channel": delivery.target["channel"],
            "text": delivery.text,
            "unfurl_links": False,
        }
        if delivery.target.get("blocks"):
            # The blocks are what is shown; `text` stays as the notification's words.
            body["blocks"] = delivery.target["blocks"]
        if delivery.target.get("thread_ts"):
            body["thread_ts"] = delivery.target["thread_ts"]
        response = self._client.post(
            f"{self._base}/chat.postMessage",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        result = classify(response, message_id=id_at("ts"))
        if not isinstance(result, Sent):
            return result
        payload = json_or_none(response)
        if not isinstance(payload, dict):
            return RetryLater(f"slack: unreadable answer {response.text[:200]!r}")
        if payload.get("ok"):
            return result
        problem = str(payload.get("error") or "unknown_error")
        if problem in _TRANSIENT:
            return RetryLater(f"slack: {problem}", retry_after_ms(response))
        return Refused(f"slack: {problem}")
