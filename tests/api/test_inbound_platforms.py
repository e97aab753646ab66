"""Every platform through the real app: valid → stored once; tampered, wrong secret or stale
→ 401 with nothing stored; handshakes answered as each platform expects."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

import pytest
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from sqlalchemy import func, select
from standardwebhooks.webhooks import Webhook
from twilio.request_validator import RequestValidator

from nexus.adapters.inbound.email import sign as sign_email
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


def _hub(body: bytes, secret: str, now: int) -> Delivery:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return Delivery(
        {"X-Hub-Signature-256": f"sha256={digest}", "Content-Type": "application/json"}, body
    )


def _slack(body: bytes, secret: str, now: int) -> Delivery:
    digest = hmac.new(secret.encode(), f"v0:{now}:".encode() + body, hashlib.sha256).hexdigest()
    return Delivery(
        {
            "X-Slack-Request-Timestamp": str(now),
            "X-Slack-Signature": f"v0={digest}",
            "Content-Type": "application/json",
        },
        body,
    )


def _discord(body: bytes, secret: str, now: int) -> Delivery:
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


def _twilio(body: bytes, secret: str, now: int) -> Delivery:
    params = dict(parse_qsl(body.decode(), keep_blank_values=True))
    signature = RequestValidator(secret).compute_signature(f"{BASE}/v1/inbound/twilio", params)
    return Delivery(
        {"X-Twilio-Signature": signature, "Content-Type": "application/x-www-form-urlencoded"}, body
    )


def _email(body: bytes, secret: str, now: int) -> Delivery:
    secret = WHSEC if secret == SECRET else secret  # shares NEXUS_WEBHOOK_SECRET with webhook
    return Delivery(
        {
            "X-Nexus-Timestamp": str(now),
            "X-Nexus-Signature": sign_email(secret, now, body),
            "Content-Type": "message/rfc822",
        },
        body,
    )


def _github(body: bytes, secret: str, now: int) -> Delivery:
    signed = _hub(body, secret, now)
    return Delivery(
        {**signed.headers, "X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "d-1"}, body
    )


def _webhook(body: bytes, secret: str, now: int) -> Delivery:
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


def _telegram(body: bytes, secret: str, now: int) -> Delivery:
    return Delivery(
        {"X-Telegram-Bot-Api-Secret-Token": secret, "Content-Type": "application/json"}, body
    )


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


CASES: dict[str, tuple[Signer, bytes, str, bool]] = {
    # adapter: (signer, body, expected event id, has a replay window)
    "telegram": (
        _telegram,
        _json(
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
        _slack,
        _json(
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
        _discord,
        _json(
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
        _hub,
        _json(
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
        _twilio,
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
        _email,
        b"From: Ada <ada@example.com>\nTo: bot@example.com\n"
        b"Message-ID: <m1@example.com>\nSubject: hi\n\nhello\n",
        "email:m1@example.com",
        True,
    ),
    "github": (
        _github,
        _json(
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
        _webhook,
        _json({"type": "message", "data": {"text": "hi"}}),
        "webhook:msg_1",
        True,
    ),
}


def _app(database: Database) -> TestClient:
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


def _events(database: Database) -> int:
    with database.unit_of_work() as uow:
        count = select(func.count()).select_from(table_of(Event))
        return int(uow.connection.execute(count).scalar_one())


def _post(client: TestClient, name: str, delivery: Delivery) -> int:
    response = client.post(f"/v1/inbound/{name}", content=delivery.body, headers=delivery.headers)
    return response.status_code


@pytest.mark.parametrize("name", sorted(CASES))
def test_valid_is_stored_once_and_bad_signatures_store_nothing(
    pg_database: Database, name: str
) -> None:
    signer, body, event_id, windowed = CASES[name]
    client = _app(pg_database)
    if name != "telegram":  # Telegram signs nothing: it echoes a secret token in a header
        tampered = signer(body, SECRET, NOW_S)
        assert _post(client, name, Delivery(tampered.headers, body + b"\n")) == 401
    assert _post(client, name, signer(body, "not-the-secret", NOW_S)) == 401
    if windowed:
        assert _post(client, name, signer(body, SECRET, NOW_S - 600)) == 401
    assert _events(pg_database) == 0
    assert _post(client, name, signer(body, SECRET, NOW_S)) in (200, 202)
    assert _post(client, name, signer(body, SECRET, NOW_S)) in (200, 202)
    assert _events(pg_database) == 1
    with pg_database.unit_of_work() as uow:
        assert uow.ledger.events.get(event_id) is not None


def test_handshakes_are_answered_in_each_platforms_format(pg_database: Database) -> None:
    client = _app(pg_database)
    challenge = _slack(_json({"type": "url_verification", "challenge": "c-123"}), SECRET, NOW_S)
    answered = client.post("/v1/inbound/slack", content=challenge.body, headers=challenge.headers)
    assert answered.json() == {"challenge": "c-123"}
    ping = _discord(_json({"type": 1, "id": "1"}), SECRET, NOW_S)
    assert client.post("/v1/inbound/discord", content=ping.body, headers=ping.headers).json() == {
        "type": 1
    }
    hub = client.get(
        "/v1/inbound/whatsapp",
        params={"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "9931"},
    )
    assert (hub.status_code, hub.text, hub.headers["content-type"].split(";")[0]) == (
        200,
        "9931",
        "text/plain",
    )
    assert (
        client.get(
            "/v1/inbound/whatsapp",
            params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "1"},
        ).status_code
        == 401
    )
    sms = _twilio(CASES["twilio"][1], SECRET, NOW_S)
    twiml = client.post("/v1/inbound/twilio", content=sms.body, headers=sms.headers)
    assert twiml.headers["content-type"].startswith("application/xml")
    assert twiml.text.endswith("<Response></Response>")
    command = _discord(CASES["discord"][1], SECRET, NOW_S)
    deferred = client.post("/v1/inbound/discord", content=command.body, headers=command.headers)
    assert deferred.json() == {"type": 5}
    assert _events(pg_database) == 2  # the SMS and the command; handshakes store nothing


def test_an_unconfigured_platform_refuses_everything(pg_database: Database) -> None:
    client = TestClient(
        create_app(bootstrap(Settings(), database=pg_database, doorbell=RecordingDoorbell()))
    )
    for name, (signer, body, _, _) in CASES.items():
        response = client.post(
            f"/v1/inbound/{name}", content=body, headers=signer(body, SECRET, NOW_S).headers
        )
        assert response.status_code == 401, name
        assert "is not set" in response.json()["error"]["message"]
    assert _events(pg_database) == 0
