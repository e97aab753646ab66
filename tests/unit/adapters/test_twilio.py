"""Twilio: the published RequestValidator vector, proxies, inbound messages and statuses."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

import pytest
from twilio.request_validator import RequestValidator

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.twilio import EMPTY_TWIML, TwilioAdapter
from nexus.event import NexusEvent

# Twilio's own example (security docs; twilio-python's test_request_validator).
VECTOR_TOKEN = "12345"
VECTOR_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
VECTOR_PARAMS = {
    "CallSid": "CA1234567890ABCDE",
    "Digits": "1234",
    "From": "+14158675309",
    "To": "+18005551212",
    "Caller": "+14158675309",
}
VECTOR_SIGNATURE = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
TOKEN = "auth-token"
URL = "https://bot.example.com/v1/inbound/twilio"
INBOUND_SMS = (
    "ToCountry=US&ToState=District+Of+Columbia&SmsMessageSid=SMe287d7109a5a925f182f0e07fe5b223b"
    "&NumMedia=0&ToCity=&FromZip=01022&SmsSid=SMe287d7109a5a925f182f0e07fe5b223b&FromState=MA"
    "&SmsStatus=received&FromCity=CHICOPEE&Body=Msg&FromCountry=US&To=%2B12028831111&ToZip="
    "&NumSegments=1&MessageSid=SMe287d7109a5a925f182f0e07fe5b223b&AccountSid=acctid"
    "&From=%2B14133881111&ApiVersion=2010-04-01"
)


def _signed(body: str, *, url: str = URL, seen_as: str | None = None) -> InboundRequest:
    params = dict(parse_qsl(body, keep_blank_values=True))
    signature = RequestValidator(TOKEN).compute_signature(url, params)
    return InboundRequest(
        method="POST",
        url=seen_as or url,
        headers={"x-twilio-signature": signature},
        body=body.encode(),
    )


def _parse(body: str) -> NexusEvent:
    adapter = TwilioAdapter(TOKEN)
    request = _signed(body)
    adapter.verify(request, now_ms=0)
    outcome = adapter.parse(request)
    assert outcome.answer is not None and outcome.answer.body == EMPTY_TWIML
    (event,) = outcome.events
    return event


def test_the_published_vector_verifies() -> None:
    request = InboundRequest(
        method="POST",
        url=VECTOR_URL,
        headers={"x-twilio-signature": VECTOR_SIGNATURE},
        body=urlencode(VECTOR_PARAMS).encode(),
    )
    TwilioAdapter(VECTOR_TOKEN).verify(request, now_ms=0)
    with pytest.raises(SignatureRejected, match="does not match"):
        TwilioAdapter("54321").verify(request, now_ms=0)
    tampered = InboundRequest(
        request.method, request.url, request.headers, request.body.replace(b"1234", b"9999")
    )
    with pytest.raises(SignatureRejected, match="does not match"):
        TwilioAdapter(VECTOR_TOKEN).verify(tampered, now_ms=0)


def test_behind_a_proxy_the_public_url_is_what_twilio_signed() -> None:
    request = _signed(INBOUND_SMS, seen_as="http://10.0.0.5:8000/v1/inbound/twilio")
    with pytest.raises(SignatureRejected, match="NEXUS_PUBLIC_URL"):
        TwilioAdapter(TOKEN).verify(request, now_ms=0)
    TwilioAdapter(TOKEN, "https://bot.example.com/").verify(request, now_ms=0)


def test_missing_signature_or_token_is_401() -> None:
    bare = InboundRequest("POST", URL, {}, INBOUND_SMS.encode())
    with pytest.raises(SignatureRejected, match="missing"):
        TwilioAdapter(TOKEN).verify(bare, now_ms=0)
    with pytest.raises(SignatureRejected, match="NEXUS_TWILIO_AUTH_TOKEN"):
        TwilioAdapter(None).verify(_signed(INBOUND_SMS), now_ms=0)


def test_an_inbound_sms() -> None:
    event = _parse(INBOUND_SMS)
    assert event.id == "twilio:SMe287d7109a5a925f182f0e07fe5b223b" and event.routable
    assert (event.platform, event.text, event.space) == ("sms", "Msg", "+12028831111")
    assert event.container is not None and event.container.id == "+14133881111"


def test_mms_media_and_whatsapp_via_twilio() -> None:
    mms = _parse(
        INBOUND_SMS.replace("NumMedia=0", "NumMedia=2")
        + "&MediaUrl0=cat.jpg&MediaContentType0=image%2Fjpeg&MediaUrl1=dog.jpg"
    )
    assert [(a.kind, a.url, a.file_id, a.mime_type) for a in mms.attachments] == [
        ("image", "cat.jpg", "cat.jpg", "image/jpeg"),
        ("file", "dog.jpg", "dog.jpg", None),
    ]
    whatsapp = _parse(INBOUND_SMS.replace("From=%2B", "From=whatsapp:%2B") + "&ProfileName=Ada")
    assert whatsapp.platform == "whatsapp"
    assert whatsapp.sender is not None and whatsapp.sender.display_name == "Ada"


def test_status_callbacks_are_recorded_per_status() -> None:
    delivered = _parse("MessageSid=SMe287&MessageStatus=delivered")
    failed = _parse("ErrorCode=21610&MessageSid=SMe287&MessageStatus=failed&To=%2B12028831111")
    assert (delivered.id, failed.id) == (
        "twilio:status:SMe287:delivered",
        "twilio:status:SMe287:failed",
    )
    assert delivered.kind == failed.kind == "status" and not failed.routable
    assert failed.ignore_reason == "delivery status failed (error 21610)"


@pytest.mark.parametrize("body", [b"Body=hi", b"\xff\xfe", b"MessageSid=SM1&NumMedia=x&From=1"])
def test_malformed_forms_are_400(body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        TwilioAdapter(TOKEN).parse(InboundRequest("POST", URL, {}, body))


def test_num_media_is_read_no_further_than_twilios_ten() -> None:
    form = {"MessageSid": "SM9", "From": "+1", "Body": "hi", "NumMedia": "20"}
    form |= {f"MediaUrl{i}": f"https://media/{i}" for i in range(12)}
    (event,) = (
        TwilioAdapter("t")
        .parse(InboundRequest("POST", "https://x", {}, urlencode(form).encode()))
        .events
    )
    assert [a.url for a in event.attachments] == [f"https://media/{i}" for i in range(10)]
