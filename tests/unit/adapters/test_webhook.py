"""Standard Webhooks: the spec's signed example, the 5-minute window, key rotation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.webhook import StandardWebhookAdapter

# The spec's example payload and ids, signed with the reference library's test secret.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
VECTOR_TIMESTAMP = 1674087231
VECTOR_SIGNATURE = "v1,ARw42xaAApl/nxRo+iPGYwSaMQaOwMo2eyH5JBRA+bQ="
VECTOR_BODY = (
    b'{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z",'
    b'"data":{"id":"1f81eb52-5198-4599-803e-771906343485"}}'
)
NOW_MS = VECTOR_TIMESTAMP * 1000


def _request(
    body: bytes = VECTOR_BODY,
    signature: str = VECTOR_SIGNATURE,
    timestamp: int = VECTOR_TIMESTAMP,
    msg_id: str = VECTOR_ID,
) -> InboundRequest:
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }
    return InboundRequest("POST", "https://x", headers, body)


def _signed(payload: dict[str, Any], msg_id: str = "msg_1") -> InboundRequest:
    body = json.dumps(payload)
    when = datetime.fromtimestamp(VECTOR_TIMESTAMP, UTC)
    signature = Webhook(VECTOR_SECRET).sign(msg_id, when, body)
    return _request(body.encode(), signature, msg_id=msg_id)


def test_the_spec_example_verifies_and_is_recorded_for_hooks() -> None:
    adapter = StandardWebhookAdapter(VECTOR_SECRET)
    adapter.verify(_request(), now_ms=NOW_MS)
    (event,) = adapter.parse(_request()).events
    assert event.id == "webhook:msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
    assert (event.kind, event.routable) == ("system", False)
    assert event.occurred_at == NOW_MS and event.raw["type"] == "contact.created"


def test_a_rotated_secret_still_verifies_with_several_signatures() -> None:
    both = f"v1,bm90IGl0 {VECTOR_SIGNATURE}"
    StandardWebhookAdapter(VECTOR_SECRET).verify(_request(signature=both), now_ms=NOW_MS)


@pytest.mark.parametrize(
    ("request_", "now_ms", "reason"),
    [
        (_request(body=VECTOR_BODY.replace(b"contact", b"account")), NOW_MS, "does not match"),
        (_request(msg_id="msg_other"), NOW_MS, "does not match"),
        (_request(), NOW_MS + 301_000, "window"),
        (_request(), NOW_MS - 301_000, "window"),
        (_request(timestamp=VECTOR_TIMESTAMP + 1), NOW_MS, "does not match"),
        (InboundRequest("POST", "https://x", {}, VECTOR_BODY), NOW_MS, "missing"),
    ],
)
def test_tampering_staleness_and_missing_headers_are_401(
    request_: InboundRequest, now_ms: int, reason: str
) -> None:
    with pytest.raises(SignatureRejected, match=reason):
        StandardWebhookAdapter(VECTOR_SECRET).verify(request_, now_ms=now_ms)


def test_a_wrong_or_unset_secret_is_401() -> None:
    with pytest.raises(SignatureRejected, match="does not match"):
        StandardWebhookAdapter("whsec_" + "A" * 32).verify(_request(), now_ms=NOW_MS)
    with pytest.raises(SignatureRejected, match="NEXUS_WEBHOOK_SECRET"):
        StandardWebhookAdapter(None).verify(_request(), now_ms=NOW_MS)


def test_a_message_payload_becomes_a_routable_message() -> None:
    adapter = StandardWebhookAdapter(VECTOR_SECRET)
    request = _signed(
        {
            "type": "message.created",
            "data": {
                "text": "Server disk at 91%",
                "sender": {"id": "alertmanager", "name": "Alerts"},
                "conversation": {"kind": "channel", "id": "ops"},
                "thread_id": "incident-7",
                "source": "prometheus",
            },
        }
    )
    adapter.verify(request, now_ms=NOW_MS)
    (event,) = adapter.parse(request).events
    assert event.routable and event.text == "Server disk at 91%" and event.space == "prometheus"
    assert event.container is not None and (event.container.kind, event.container.id) == (
        "channel",
        "ops",
    )
    assert event.platform_thread_id == "incident-7"
    assert event.sender is not None and event.sender.display_name == "Alerts"


def test_a_bare_text_payload_defaults_to_a_direct_conversation() -> None:
    (event,) = (
        StandardWebhookAdapter(VECTOR_SECRET)
        .parse(_signed({"type": "note", "data": {"text": "ping"}}))
        .events
    )
    assert event.container is not None and (event.container.kind, event.container.id) == (
        "dm",
        "webhook",
    )


@pytest.mark.parametrize(
    "payload", [b"[]", b"{", b'{"data": {"text": "x", "conversation": {"kind": "room"}}}']
)
def test_malformed_payloads_are_400(payload: bytes) -> None:
    with pytest.raises(MalformedRequest):
        StandardWebhookAdapter(VECTOR_SECRET).parse(_request(body=payload))
