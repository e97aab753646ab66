"""Email: the relay signature, RFC 822 (plain, multipart, broken, bounces), Gmail JSON."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import random
from typing import Any

import pytest

from nexus.adapters.inbound.base import InboundRequest, MalformedRequest, SignatureRejected
from nexus.adapters.inbound.email import EmailAdapter, sign
from nexus.adapters.inbound.email_mime import html_to_text, strip_quoted
from nexus.event import NexusEvent

SECRET = "relay-secret"
NOW = 1_767_225_600
adapter = EmailAdapter(SECRET)

# A fixed vector, computed outside Python with
# `printf '1767225600.%s' "$BODY" | openssl dgst -sha256 -hmac whsec_nexus_test`.
VECTOR_SECRET = "whsec_nexus_test"
VECTOR_TIMESTAMP = 1_767_225_600
VECTOR_BODY = b"Message-ID: <v1@relay.example>\n\nhello"
VECTOR_SIGNATURE = "v1=b13bf80780bcd6633c1ad8deef18e3f07d7d0dfe9fc9ff24d1a34189d5990c06"

# CPython's Lib/test/test_email/data/msg_01.txt, as a mail server delivers it.
PLAIN = b"""Return-Path: <bbb@zzz.org>
Delivered-To: bbb@zzz.org
Received: by mail.zzz.org (Postfix, from userid 889)
\tid 27CEAD38CC; Fri,  4 May 2001 14:05:44 -0400 (EDT)
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii
Content-Transfer-Encoding: 7bit
Message-ID: <15090.61304.110929.45684@aaa.zzz.org>
From: bbb@ddd.com (John X. Doe)
To: bbb@zzz.org
Subject: This is a test message
Date: Fri, 4 May 2001 14:05:44 -0400


Hi,

Do you like this message?

-Me
"""
# CPython's msg_10 (a Message-ID added): a text body followed by inline text parts.
MIXED = b"""MIME-Version: 1.0
Message-ID: <lyrics@python.org>
From: Barry Warsaw <barry@python.org>
To: Dingus Lovers <cravindogs@cravindogs.com>
Subject: Lyrics
Date: Fri, 20 Apr 2001 19:35:02 -0400
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/plain; charset="us-ascii"
Content-Transfer-Encoding: 7bit

This is a 7bit encoded message.

--BOUNDARY
Content-Type: text/html; charset="iso-8859-1"
Content-Transfer-Encoding: Quoted-Printable

=A1This is a Quoted Printable encoded message!

--BOUNDARY
Content-Type: text/plain; charset="iso-8859-1"
Content-Transfer-Encoding: Base64

VGhpcyBpcyBhIEJhc2U2NCBlbmNvZGVkIG1lc3NhZ2UuCg==

--BOUNDARY--
"""
# CPython's msg_15: Outlook Express nests two parts under one boundary.
BROKEN = b"""Return-Path: <xx@xx.dk>
User-Agent: Microsoft-Outlook-Express-Macintosh-Edition/5.02.2106
Subject: XX
From: xx@xx.dk
To: XX
Message-ID: <xxxx>
Mime-version: 1.0
Content-type: multipart/mixed;
   boundary="MS_Mac_OE_3071477847_720252_MIME_Part"

> Denne meddelelse er i MIME-format. Da dit postl

--MS_Mac_OE_3071477847_720252_MIME_Part
Content-type: multipart/alternative;
   boundary="MS_Mac_OE_3071477847_720252_MIME_Part"


--MS_Mac_OE_3071477847_720252_MIME_Part
Content-type: text/plain; charset="ISO-8859-1"
Content-transfer-encoding: quoted-printable

Some removed test.=20

--MS_Mac_OE_3071477847_720252_MIME_Part
Content-type: text/html; charset="ISO-8859-1"
Content-transfer-encoding: quoted-printable

<HTML><BODY>Some removed text.</BODY></HTML>

--MS_Mac_OE_3071477847_720252_MIME_Part--


--MS_Mac_OE_3071477847_720252_MIME_Part
Content-type: image/gif; name="xx.gif";
 x-mac-creator="6F676C65";
 x-mac-type="47494666"
Content-disposition: attachment
Content-transfer-encoding: base64

Some removed base64 encoded chars.

--MS_Mac_OE_3071477847_720252_MIME_Part--
"""
# CPython's msg_05: a delivery status notification.
BOUNCE = b"""From: foo
Subject: bar
To: baz
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="D1690A7AC1.996856090/mail.example.com"
Message-Id: <20010803162810.0CA8AA7ACC@mail.example.com>

This is a MIME-encapsulated message.

--D1690A7AC1.996856090/mail.example.com
Content-Type: text/plain

Yadda yadda yadda

--D1690A7AC1.996856090/mail.example.com
Content-Type: message/rfc822

From: nobody@python.org

Yadda yadda yadda

--D1690A7AC1.996856090/mail.example.com--
"""
# github/email_reply_parser's test/emails/email_multiple_replies.txt.
NESTED_REPLY = """TAKE 3 - testing once again

On Fri, Apr 3, 2020 at 12:32 PM Someone <
someone@example.com> wrote:

> TAKE 2 - Lets see what is posted now to the portal
>
> On Fri, Apr 3, 2020 at 12:31 PM Someone <
> someone@example.com> wrote:
>
>> Lets see what is posted now to the portal
>>
>> On Fri, Apr 3, 2020 at 11:58 AM <projects@example.com> wrote:
>>
>>> Project~Stream - Comment Posted
"""


def _request(
    body: bytes, *, content_type: str = "message/rfc822", stamp: int = NOW, secret: str = SECRET
) -> InboundRequest:
    headers = {
        "content-type": content_type,
        "x-nexus-timestamp": str(stamp),
        "x-nexus-signature": sign(secret, stamp, body),
    }
    return InboundRequest("POST", "https://nexus.example/v1/inbound/email", headers, body)


def _parse(body: bytes, content_type: str = "message/rfc822") -> NexusEvent:
    request = _request(body, content_type=content_type)
    adapter.verify(request, now_ms=NOW * 1000)
    (event,) = adapter.parse(request).events
    return event


def _mail(headers: str, body: str) -> bytes:
    base = "From: Ada Lovelace <Ada@Example.com>\nTo: bot@nexus.example\n"
    return (base + headers.strip() + "\n\n" + body).encode()


# -- signature -----------------------------------------------------------------------------


def test_the_fixed_vector_signs_and_verifies() -> None:
    assert sign(VECTOR_SECRET, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    request = InboundRequest(
        "POST",
        "https://nexus.example/v1/inbound/email",
        {"x-nexus-timestamp": str(VECTOR_TIMESTAMP), "x-nexus-signature": VECTOR_SIGNATURE},
        VECTOR_BODY,
    )
    EmailAdapter(VECTOR_SECRET).verify(request, now_ms=VECTOR_TIMESTAMP * 1000 + 299_000)
    with pytest.raises(SignatureRejected, match="window"):
        EmailAdapter(VECTOR_SECRET).verify(request, now_ms=(VECTOR_TIMESTAMP + 301) * 1000)


def _without(request: InboundRequest, header: str) -> InboundRequest:
    headers = {k: v for k, v in request.headers.items() if k != header}
    return InboundRequest("POST", request.url, headers, request.body)


@pytest.mark.parametrize(
    ("request_", "now_ms", "reason"),
    [
        (_request(PLAIN, secret="other"), NOW * 1000, "does not match"),
        (_request(PLAIN), (NOW + 301) * 1000, "window"),
        (_request(PLAIN), (NOW - 301) * 1000, "window"),  # dated in the future
        (_without(_request(PLAIN), "x-nexus-signature"), NOW * 1000, "missing"),
        (_without(_request(PLAIN), "x-nexus-timestamp"), NOW * 1000, "missing"),
        (_request(PLAIN, stamp=-5), NOW * 1000, "not a Unix time"),
    ],
)
def test_signature_failures_are_401(request_: InboundRequest, now_ms: int, reason: str) -> None:
    with pytest.raises(SignatureRejected, match=reason):
        adapter.verify(request_, now_ms=now_ms)


def test_a_tampered_body_is_refused() -> None:
    signed = _request(PLAIN)
    tampered = InboundRequest("POST", "x", dict(signed.headers), PLAIN.replace(b"Hi", b"Yo"))
    with pytest.raises(SignatureRejected, match="does not match"):
        adapter.verify(tampered, now_ms=NOW * 1000)


def test_rotation_accepts_any_offered_value() -> None:
    headers = dict(_request(PLAIN).headers)
    headers["x-nexus-signature"] = f"{sign('old', NOW, PLAIN)}, {sign(SECRET, NOW, PLAIN)}"
    adapter.verify(InboundRequest("POST", "x", headers, PLAIN), now_ms=NOW * 1000)
    headers["x-nexus-signature"] = f"{sign('old', NOW, PLAIN)}, {sign('older', NOW, PLAIN)}"
    with pytest.raises(SignatureRejected, match="does not match"):
        adapter.verify(InboundRequest("POST", "x", headers, PLAIN), now_ms=NOW * 1000)


@pytest.mark.parametrize("secret", [None, ""])
def test_no_secret_means_email_is_off(secret: str | None) -> None:
    with pytest.raises(SignatureRejected, match="NEXUS_WEBHOOK_SECRET is not set"):
        EmailAdapter(secret).verify(_request(PLAIN), now_ms=NOW * 1000)


# -- RFC 822 -------------------------------------------------------------------------------


def test_a_plain_message_is_a_routable_dm() -> None:
    event = _parse(PLAIN)
    assert event.id == "email:15090.61304.110929.45684@aaa.zzz.org"
    assert (event.kind, event.routable, event.platform) == ("message", True, "email")
    assert event.text == "Hi,\n\nDo you like this message?\n\n-Me"
    assert event.sender is not None and event.sender.id == "bbb@ddd.com"
    assert event.sender.display_name == "John X. Doe" and not event.sender.is_bot
    assert event.container is not None and (event.container.kind, event.container.id) == (
        "dm",
        "bbb@ddd.com",
    )
    assert event.space == "bbb@zzz.org" and event.occurred_at == 988_999_544_000
    assert event.message_id == "15090.61304.110929.45684@aaa.zzz.org"
    assert (event.platform_thread_id, event.reply_to, event.attachments) == (None, None, ())
    assert event.raw["subject"] == "This is a test message"
    assert event.raw["text"] == event.text and "received" not in event.raw["headers"]


def test_a_redelivery_has_the_same_id() -> None:
    again = PLAIN.replace(b"Return-Path: <bbb@zzz.org>\n", b"")
    assert _parse(again).id == _parse(PLAIN).id


def test_a_reply_keeps_only_what_is_new_and_threads_on_the_root() -> None:
    event = _parse(
        _mail(
            "Message-ID: <r2@example.com>\nIn-Reply-To: <r1@example.com>\n"
            "References: <r0@example.com>\n <r1@example.com>\nSubject: Re: portal\n"
            "Date: Fri, 3 Apr 2020 12:40:00 +0000",
            NESTED_REPLY,
        )
    )
    assert event.text == "TAKE 3 - testing once again" and event.routable
    assert (event.platform_thread_id, event.reply_to) == ("r0@example.com", "r1@example.com")
    assert event.sender is not None and event.sender.id == "ada@example.com"
    assert event.sender.display_name == "Ada Lovelace"
    assert event.occurred_at == 1_585_917_600_000


def test_an_overlong_message_id_is_hashed_into_a_stable_key() -> None:
    long_id = "x" * 300 + "@example.com"
    event = _parse(_mail(f"Message-ID: <{long_id}>", "hi"))
    assert event.id == "email:sha256:" + hashlib.sha256(long_id.encode()).hexdigest()
    assert event.message_id == long_id
    # The ledger's column keeps a bounded form; the payload keeps the whole id for replies.
    assert event.raw["message_id"] == long_id


def test_a_reply_without_references_threads_on_in_reply_to() -> None:
    event = _parse(_mail("Message-ID: <r2@x>\nIn-Reply-To: <r1@x>", "yes"))
    assert (event.platform_thread_id, event.reply_to) == ("r1@x", "r1@x")


def test_multipart_mixed_takes_the_first_text_part_and_lists_no_files() -> None:
    event = _parse(MIXED)
    assert event.text == "This is a 7bit encoded message."
    assert event.attachments == ()  # inline parts without a filename are not files
    assert event.space == "cravindogs@cravindogs.com"
    assert event.sender is not None and event.sender.display_name == "Barry Warsaw"


def test_broken_mime_parses_best_effort() -> None:
    event = _parse(BROKEN)
    assert (event.id, event.kind, event.routable) == ("email:xxxx", "message", True)
    assert event.text == "Some removed test."
    assert event.container is not None and event.container.id == "xx@xx.dk"
    assert event.occurred_at == 0  # no Date header


def test_an_attachment_with_a_caption_is_described_never_stored() -> None:
    message = _mail(
        'Message-ID: <att@x>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"',
        "--B\nContent-Type: text/plain\n\nQ3 numbers, see attached\n--B\n"
        "Content-Type: application/pdf\n"
        'Content-Disposition: attachment; filename="q3.pdf"\nContent-Transfer-Encoding: base64'
        "\n\n" + base64.b64encode(b"%PDF-1.4 fake").decode() + "\n--B--\n",
    )
    event = _parse(message)
    assert event.text == "Q3 numbers, see attached" and event.routable
    assert [(a.kind, a.name, a.mime_type, a.size) for a in event.attachments] == [
        ("document", "q3.pdf", "application/pdf", 13)
    ]
    assert event.raw["attachments"] == [
        {"kind": "document", "name": "q3.pdf", "mime_type": "application/pdf", "size": 13}
    ]
    assert "JVBER" not in json.dumps(event.raw)  # the base64 bytes are not kept


def test_an_html_only_message_becomes_text() -> None:
    event = _parse(
        _mail(
            "Message-ID: <h@x>\nContent-Type: text/html; charset=utf-8",
            "<html><head><title>t</title></head><body><p>Hello&nbsp;<b>there</b></p>"
            "<div>second line</div></body></html>",
        )
    )
    assert event.text == "Hello there\nsecond line"


def test_undeclared_8bit_and_encoded_words_are_text() -> None:
    event = _parse(
        b"From: Jos\xc3\xa9 <jose@example.com>\nTo: bot@x\nMessage-ID: <u@x>\n"
        b"Subject: =?utf-8?q?caf=C3=A9?=\n\nol\xc3\xa1"
    )
    assert event.sender is not None and event.sender.display_name == "José"
    assert event.raw["subject"] == "café" and event.text == "olá"


def test_a_date_in_unknown_zone_is_read_as_utc() -> None:
    event = _parse(_mail("Message-ID: <d@x>\nDate: Fri, 3 Apr 2020 12:40:00 -0000", "hi"))
    assert event.occurred_at == 1_585_917_600_000


def test_a_bounce_is_a_status() -> None:
    event = _parse(BOUNCE)
    assert (event.kind, event.ignore_reason) == ("status", "delivery status notification")
    assert event.id == "email:20010803162810.0CA8AA7ACC@mail.example.com" and not event.routable


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("Auto-Submitted: auto-replied", "Auto-Submitted: auto-replied"),
        ("Precedence: bulk", "Precedence: bulk"),
        ("Precedence: list", "Precedence: list"),
        ("X-Autoreply: yes", "auto-responder header"),
    ],
)
def test_automatic_mail_is_a_bot_echo(header: str, reason: str) -> None:
    event = _parse(PLAIN.replace(b"MIME-Version", header.encode() + b"\nMIME-Version"))
    assert (event.kind, event.ignore_reason, event.routable) == ("bot_echo", reason, False)
    assert event.sender is not None and event.sender.is_bot


def test_auto_submitted_no_is_a_person() -> None:
    event = _parse(PLAIN.replace(b"MIME-Version", b"Auto-Submitted: no\nMIME-Version"))
    assert event.routable


def test_a_message_with_no_sender_is_recorded_as_unsupported() -> None:
    event = _parse(b"To: bot@x\nMessage-ID: <n@x>\n\nhello")
    assert (event.kind, event.ignore_reason) == ("unsupported", "no sender address")


# -- Gmail API JSON ------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


def _gmail(**extra: Any) -> bytes:
    # n8n's fixture of users.messages.get(format=full), trimmed to what is read.
    message = {
        "id": "a1b2c3d4e5f6g7h8",
        "threadId": "a1b2c3d4e5f6g7h8",
        "labelIds": ["UNREAD", "CATEGORY_PROMOTIONS", "INBOX"],
        "payload": {
            "partId": "",
            "mimeType": "multipart/alternative",
            "filename": "",
            "headers": [
                {"name": "Delivered-To", "value": "exampleuser@gmail.com"},
                {"name": "Date", "value": "Thu, 5 Dec 2024 08:30:00 -0800"},
                {"name": "From", "value": "Holiday Deals <promo@promotion.example.com>"},
                {"name": "To", "value": "exampleuser@gmail.com"},
                {"name": "Message-ID", "value": "<12345abc67890@promotion.example.com>"},
                {"name": "Subject", "value": "Exclusive Holiday Discounts!"},
            ],
            "body": {"size": 0},
            "parts": [
                {
                    "partId": "0",
                    "mimeType": "text/plain",
                    "filename": "",
                    "body": {
                        "size": 1234,
                        "data": "VGhpcyBpcyBhbiBleGFtcGxlIG1lc3NhZ2UuIFRoYW5rIHlvdSBmb3Igc2hvcH"
                        "Bpbmcgd2l0aCB1cy4=",
                    },
                },
                {
                    "partId": "1",
                    "mimeType": "text/html",
                    "filename": "",
                    "body": {"size": 5678, "data": _b64url(b"<div>This is html.</div>")},
                },
            ],
        },
        "historyId": "54321",
        "internalDate": "1733405400000",
    }
    message.update(extra)
    return json.dumps(message).encode()


def test_a_gmail_api_message() -> None:
    event = _parse(_gmail(), "application/json")
    assert event.id == "email:gmail:a1b2c3d4e5f6g7h8" and event.routable
    assert event.text == "This is an example message. Thank you for shopping with us."
    assert event.sender is not None and event.sender.id == "promo@promotion.example.com"
    assert event.sender.display_name == "Holiday Deals"
    assert event.container is not None and event.container.id == "promo@promotion.example.com"
    assert event.occurred_at == 1_733_405_400_000 and event.platform_thread_id == "a1b2c3d4e5f6g7h8"
    assert event.space == "exampleuser@gmail.com"
    assert event.message_id == "12345abc67890@promotion.example.com" and event.reply_to is None
    assert event.raw["subject"] == "Exclusive Holiday Discounts!"
    assert event.raw["historyId"] == "54321"


def test_a_gmail_reply_with_an_attachment_and_html_only_body() -> None:
    payload = {
        "mimeType": "multipart/mixed",
        "headers": [
            {"name": "From", "value": "ada@example.com"},
            {"name": "To", "value": "bot@example.com"},
            {"name": "In-Reply-To", "value": "<r1@example.com>"},
        ],
        "parts": [
            {"mimeType": "text/html", "body": {"data": _b64url(b"<p>See&amp;sign</p>")}},
            {
                "mimeType": "application/pdf",
                "filename": "contract.pdf",
                "body": {"attachmentId": "ANGjdJ8", "size": 4096, "data": _b64url(b"%PDF")},
            },
        ],
    }
    event = _parse(_gmail(id="g2", threadId="t1", payload=payload), "application/json")
    assert event.text == "See&sign" and event.reply_to == "r1@example.com"
    assert event.platform_thread_id == "t1"
    assert [(a.file_id, a.name, a.size) for a in event.attachments] == [
        ("ANGjdJ8", "contract.pdf", 4096)
    ]
    assert _b64url(b"%PDF") not in json.dumps(event.raw)


def test_gmail_mail_this_mailbox_sent_is_a_bot_echo() -> None:
    event = _parse(_gmail(labelIds=["SENT"]), "application/json")
    assert (event.kind, event.routable) == ("bot_echo", False)
    assert event.ignore_reason == "written by this mailbox (label SENT)"


def test_a_gmail_push_notification_is_recorded_for_a_history_fetch() -> None:
    push = {
        "message": {
            "data": "eyJlbWFpbEFkZHJlc3MiOiAidXNlckBleGFtcGxlLmNvbSIsICJoaXN0b3J5SWQiOiAiMTIzND"
            "U2Nzg5MCJ9",
            "messageId": "2070443601311540",
            "publishTime": "2021-02-26T19:13:55.749Z",
        },
        "subscription": "projects/myproject/subscriptions/mysubscription",
    }
    event = _parse(json.dumps(push).encode(), "application/json; charset=UTF-8")
    assert (event.id, event.kind) == ("email:push:2070443601311540", "system")
    assert event.ignore_reason == "gmail push notification: fetch history"
    assert not event.routable and event.raw == push


# -- malformed -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"Subject: no id\n\nhello", "message/rfc822", "Message-ID"),
        (b"", "message/rfc822", "empty"),
        (b"[]", "application/json", "JSON object"),
        (b'{"id": 1, "payload": {}}', "application/json", "string id"),
        (b'{"id": "x"}', "application/json", "payload"),
        (b"{", "application/json", "not valid JSON"),
        (b'{"message": {}, "subscription": "s"}', "application/json", "messageId"),
    ],
)
def test_malformed_mail_is_400(body: bytes, content_type: str, reason: str) -> None:
    with pytest.raises(MalformedRequest, match=reason):
        adapter.parse(_request(body, content_type=content_type))


def test_damaged_mail_never_crashes() -> None:
    rng = random.Random(822)
    for source in (PLAIN, MIXED, BROKEN, BOUNCE):
        for _ in range(60):
            damaged = bytearray(source)
            for _ in range(rng.randint(1, 12)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            # A refusal is fine; any other exception would be a 500.
            with contextlib.suppress(MalformedRequest):
                adapter.parse(_request(bytes(damaged)))


def test_quote_stripping_and_html_helpers() -> None:
    assert strip_quoted("ok\n-----Original Message-----\nold") == "ok"
    assert strip_quoted("> only quoted") == "> only quoted"
    # Inline answers keep the quote they answer; only the trailing quoted block goes.
    assert strip_quoted("> q1\na1\n> q2\na2\n\n> rest\n> of it") == "> q1\na1\n> q2\na2"
    assert html_to_text("<p>Hello&nbsp;<b>you</b></p><script>x()</script><p>bye</p>") == (
        "Hello you\nbye"
    )
