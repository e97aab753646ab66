"""Hostile deliveries for the reliability suite: forged, oversized, deeply nested and
odd-typed bodies, each signed (or not) as a real platform or relay would send it."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook

from nexus.adapters.inbound.email import sign as sign_email

TELEGRAM_SECRET = "reliability-telegram-secret"
GITHUB_SECRET = "reliability-github-secret"
WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OVER_A_MIB = 1024 * 1024 + 1
LONG_ID = "x" * 600
TEN_MIB = 10 * 1024 * 1024


@dataclass(frozen=True)
class Delivery:
    """One request and the status it must get: 2xx stores its events, 4xx nothing."""

    name: str
    path: str
    body: bytes
    headers: dict[str, str]
    status: int


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _nested(prefix: bytes, depth: int) -> bytes:
    return prefix + b"[" * depth + b"]" * depth + b"}"


def _telegram(body: bytes, secret: str = TELEGRAM_SECRET) -> dict[str, str]:
    return {"X-Telegram-Bot-Api-Secret-Token": secret, "Content-Type": "application/json"}


def _github(body: bytes, guid: str, secret: str = GITHUB_SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": guid,
        "Content-Type": "application/json",
    }


def _webhook(body: bytes, msg_id: str, secret: str = WEBHOOK_SECRET) -> dict[str, str]:
    now = int(time.time())
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(now, UTC), body.decode())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(now),
        "webhook-signature": signature,
        "Content-Type": "application/json",
    }


def _email(body: bytes) -> dict[str, str]:
    now = int(time.time())
    return {
        "X-Nexus-Timestamp": str(now),
        "X-Nexus-Signature": sign_email(WEBHOOK_SECRET, now, body),
        "Content-Type": "message/rfc822",
    }


COMMENT = {
    "action": "created",
    "issue": {"id": 11, "number": 1, "updated_at": "2026-01-01T00:00:00Z"},
    "comment": {"id": 22, "body": "a comment", "updated_at": "2026-01-01T00:00:00Z"},
    "sender": {"login": "ada", "id": 33},
    "repository": {"full_name": "o/r", "stargazers_count": 1},
}
ODD_TELEGRAM = {
    "update_id": 10**300,
    "message": {
        "message_id": 2**80,
        "date": "yesterday",
        "from": {"id": 7001, "first_name": "Ada \ud800"},
        "chat": {"id": "c" * 400, "type": "private"},
        "text": "odd but storable\x00",
    },
}
MAIL = (
    f"From: Ada <ada@example.com>\nTo: bot@example.com\nMessage-ID: <{LONG_ID}@example.com>\n"
    "Date: Mon, 99 Foo 99999 99:99:99 +0000\nAuto-Submitted: auto-replied\nSubject: away\n\n"
    "I am away.\n"
).encode()


def deliveries() -> list[Callable[[], Delivery]]:
    """Built when sent: the signatures that carry a timestamp must be fresh."""
    comment = _json(COMMENT)
    redelivered = _json({**COMMENT, "repository": {"full_name": "o/r", "stargazers_count": 2}})
    odd = _json(ODD_TELEGRAM)
    webhook_odd = _json({"type": "m", "data": {"text": "hi", "thread_id": {"not": "a string"}}})
    webhook_ok = _json({"type": "m", "data": {"text": {"rich": "text"}}})
    big = _json({**COMMENT, "pad": "p" * OVER_A_MIB})
    deep = _nested(b'{"action": "created", "comment": ', 100_000)
    deep_webhook = _nested(b'{"type": "m", "data": ', 1_000)
    unsigned = _json({"update_id": 5, "message": {"text": "no"}})
    inbound = "/v1/inbound"
    return [
        # Forged: a wrong secret, a body changed after signing.
        lambda: Delivery("forged github", f"{inbound}/github", comment,
                         _github(comment, "g-0", secret="forged"), 401),
        lambda: Delivery("tampered webhook", f"{inbound}/webhook", webhook_ok + b" ",
                         _webhook(webhook_ok, "w-0"), 401),
        lambda: Delivery("forged telegram", f"{inbound}/telegram", unsigned,
                         _telegram(unsigned, secret="forged"), 401),
        # Oversized, refused before the body is read.
        lambda: Delivery("oversized github", f"{inbound}/github", big, _github(big, "g-1"), 413),
        # Nested far past any platform's payload: past the parser, and past the bound.
        lambda: Delivery("deep github", f"{inbound}/github", deep, _github(deep, "g-2"), 400),
        lambda: Delivery("deep webhook", f"{inbound}/webhook", deep_webhook,
                         _webhook(deep_webhook, "w-1"), 400),
        # Odd types: refused when nothing sensible can be stored.
        lambda: Delivery("update_id true", f"{inbound}/telegram",
                         _json({"update_id": True, "message": {"text": "x"}}),
                         _telegram(b""), 400),
        lambda: Delivery("thread_id object", f"{inbound}/webhook", webhook_odd,
                         _webhook(webhook_odd, "w-2"), 400),
        # Odd but storable: accepted, bounded, answered once.
        lambda: Delivery("odd telegram", f"{inbound}/telegram", odd, _telegram(odd), 200),
        lambda: Delivery("long Message-ID", f"{inbound}/email", MAIL, _email(MAIL), 200),
        lambda: Delivery("text as object", f"{inbound}/webhook", webhook_ok,
                         _webhook(webhook_ok, "w-3"), 200),
        lambda: Delivery("github comment", f"{inbound}/github", comment,
                         _github(comment, "g-3"), 200),
        # The same comment redelivered under a new GUID (repository counters moved): one row.
        lambda: Delivery("github redelivery", f"{inbound}/github", redelivered,
                         _github(redelivered, "g-4"), 200),
    ]  # fmt: skip
