"""Each platform's signing, a valid delivery per adapter, and the app built with every
secret: shared by the inbound API tests."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from sqlalchemy import func, select
from standardwebhooks.webhooks import Webhook
from twilio.request_validator import RequestValidator

from nexus.adapters.inbound.email import sign as email_signature
from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.ledger.models import Event, table_of
from nexus.settings import Settings

NOW_S = 1_767_225_600
SECRET = "platform-secret"
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
DISCORD_KEY = SigningKey(b"\x11" * 32)
BASE = "http://testserver"


@dataclass(frozen=True)
class Delivery:
    headers: dict[str, str]
    body: bytes


Signer = Callable[[bytes, str, int], Delivery]  # body, secret, unix seconds


def sign_hub(body: bytes, secret: str, now: int) -> Delivery:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return Delivery(
        {"X-Hub-Signature-256": f"sha256={digest}", "Content-Type": "application/json"}, body
    )


def sign_slack(body: bytes, secret: str, now: int) -> Delivery:
    digest = hmac.new(secret.encode(), f"v0:{now}:".encode() + body, hashlib.sha256).hexdigest()
    return Delivery(
        {
            "X-Slack-Request-Timestamp": str(now),
            "X-Slack-Signature": f"v0={digest}",
            "Content-Type": "application/json",
        },
        body,
    )


def sign_discord(body: bytes, secret: str, now: int) -> Delivery:
    key = DISCORD_KEY if secret == SECRET else SigningKey(b"\x22" * 32)
    signature = key.sign(str(now).encode() + body).signature.hex()
    return Delivery(
        {
            "X-Signature-Ed25519": signature,
            "X-Signature-Timestamp": str(now),
            "Content-Type": "application/json",
        },
        body,
    )


def sign_twilio(body: bytes, secret: str, now: int) -> Delivery:
    params = dict(parse_qsl(body.decode(), keep_blank_values=True))
    signature = RequestValidator(secret).compute_signature(f"{BASE}/v1/inbound/twilio", params)
    return Delivery(
        {"X-Twilio-Signature": signature, "Content-Type": "application/x-www-form-urlencoded"}, body
    )


def sign_email(body: bytes, secret: str, now: int) -> Delivery:
    secret = WHSEC if secret == SECRET else secret  # shares NEXUS_WEBHOOK_SECRET with webhook
    return Delivery(
        {
            "X-Nexus-Timestamp": str(now),
            "X-Nexus-Signature": email_signature(secret, now, body),
            "Content-Type": "message/rfc822",
        },
        body,
    )


def sign_github(body: bytes, secret: str, now: int) -> Delivery:
    signed = sign_hub(body, secret, now)
    return Delivery(
        {**signed.headers, "X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "d-1"}, body
    )


def sign_webhook(body: bytes, secret: str, now: int) -> Delivery:
    key = WHSEC if secret == SECRET else "whsec_" + "B" * 32
    signature = Webhook(key).sign("msg_1", datetime.fromtimestamp(now, UTC), body.decode())
    return Delivery(
        {
            "webhook-id": "msg_1",
            "webhook-timestamp": str(now),
            "webhook-signature": signature,
            "Content-Type": "application/json",
        },
        body,
    )


def sign_telegram(body: bytes, secret: str, now: int) -> Delivery:
    return Delivery(
        {"X-Telegram-Bot-Api-Secret-Token": secret, "Content-Type": "application/json"}, body
    )


def json_bytes(value: object) -> bytes:
    return json.dumps(value).encode()


CASES: dict[str, tuple[Signer, bytes, str, bool]] = {
    # adapter: (signer, body, expected event id, has a replay window)
    "telegram": (
        sign_telegram,
        json_bytes(
            {
                "update_id": 5,
                "message": {
                    "message_id": 1,
                    "date": NOW_S,
                    "chat": {"id": 9, "type": "private"},
                    "from": {"id": 9, "first_name": "Ada"},
                    "text": "hi",
                },
            }
        ),
        "telegram:5",
        False,
    ),
    "slack": (
        sign_slack,
        json_bytes(
            {
                "type": "event_callback",
                "event_id": "Ev1",
                "team_id": "T1",
                "event": {
                    "type": "message",
                    "user": "U1",
                    "text": "hi",
                    "ts": "1.0",
                    "channel": "D1",
                    "channel_type": "im",
                },
            }
        ),
        "slack:Ev1",
        True,
    ),
    "discord": (
        sign_discord,
        json_bytes(
            {
                "type": 2,
                "id": "786008729715212338",
                "channel_id": "9",
                "user": {"id": "1", "username": "ada"},
                "data": {"name": "ask", "options": []},
            }
        ),
        "discord:786008729715212338",
        False,
    ),
    "whatsapp": (
        sign_hub,
        json_bytes(
            {
                "object": "whatsapp_business_account",
                "entry": [
                    {
                        "changes": [
                            {
                                "value": {
                                    "metadata": {"phone_number_id": "1"},
                                    "messages": [
                                        {
                                            "from": "4915",
                                            "id": "wamid.A",
                                            "timestamp": str(NOW_S),
                                            "type": "text",
                                            "text": {"body": "hi"},
                                        }
                                    ],
                                }
                            }
                        ]
                    }
                ],
            }
        ),
        "whatsapp:wamid.A",
        False,
    ),
    "twilio": (
        sign_twilio,
        urlencode(
            {
                "MessageSid": "SM1",
                "From": "+14155550100",
                "To": "+14155550199",
                "Body": "hi",
                "NumMedia": "0",
                "SmsStatus": "received",
            }
        ).encode(),
        "twilio:SM1",
        False,
    ),
    "email": (
        sign_email,
        b"From: Ada <ada@example.com>\nTo: bot@example.com\n"
        b"Message-ID: <m1@example.com>\nSubject: hi\n\nhello\n",
        "email:m1@example.com",
        True,
    ),
    "github": (
        sign_github,
        json_bytes(
            {
                "action": "created",
                "issue": {"number": 1},
                "comment": {"body": "hi"},
                "sender": {"login": "ada"},
                "repository": {"full_name": "o/r"},
            }
        ),
        "github:d-1",
        False,
    ),
    "webhook": (
        sign_webhook,
        json_bytes({"type": "message", "data": {"text": "hi"}}),
        "webhook:msg_1",
        True,
    ),
}


def _with(name: str, change: Callable[[Any], None]) -> bytes:
    payload = json.loads(CASES[name][1])
    change(payload)
    return json_bytes(payload)


_FILE = {"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 5, "url_private": "u"}
_DISCORD_FILE = {"id": "7", "filename": "a.png", "content_type": "image/png", "url": "u", "size": 5}
# A valid body of each JSON adapter that carries attachments, for the hostile tests to spoil.
MEDIA_BODIES: dict[str, bytes] = {
    "telegram": _with(
        "telegram",
        lambda p: p["message"].update(
            photo=[{"file_id": "s", "width": 90, "height": 90}, {"file_id": "l", "width": 800}],
            document={"file_id": "d", "file_name": "q.pdf", "mime_type": "application/pdf"},
        ),
    ),
    "slack": _with("slack", lambda p: p["event"].update(files=[_FILE, {**_FILE, "id": "F2"}])),
    "discord": _with(
        "discord",
        lambda p: p["data"].update(
            options=[{"name": "f", "type": 11, "value": "7"}],
            resolved={"attachments": {"7": _DISCORD_FILE}},
        ),
    ),
    "whatsapp": _with(
        "whatsapp",
        lambda p: p["entry"][0]["changes"][0]["value"]["messages"][0].update(
            type="image", image={"id": "m1", "mime_type": "image/jpeg", "caption": "c"}
        ),
    ),
    "webhook": _with(
        "webhook", lambda p: p["data"].update(attachments=[{"url": "u", "mime_type": "image/png"}])
    ),
}


def app_client(database: Database) -> TestClient:
    settings = Settings(
        telegram_secret_token=SECRET,
        slack_signing_secret=SECRET,
        discord_public_key=DISCORD_KEY.verify_key.encode().hex(),
        whatsapp_app_secret=SECRET,
        whatsapp_verify_token="verify-me",
        twilio_auth_token=SECRET,
        github_webhook_secret=SECRET,
        webhook_secret=WHSEC,  # Standard Webhooks wants a whsec_ key; email uses it as is
    )
    app = create_app(
        bootstrap(
            settings, database=database, doorbell=RecordingDoorbell(), clock=lambda: NOW_S * 1000
        )
    )
    return TestClient(app, base_url=BASE)


def count_events(database: Database) -> int:
    with database.unit_of_work() as uow:
        count = select(func.count()).select_from(table_of(Event))
        return int(uow.connection.execute(count).scalar_one())
