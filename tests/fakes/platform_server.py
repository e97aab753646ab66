"""A loopback fake of the chat platforms' send APIs: Telegram, Slack, Discord, WhatsApp
Cloud, Twilio and a Standard Webhooks receiver, behind one base URL.

The real senders talk to it over httpx. Each kind of request can be scripted to fail
(`fail_next`) or to be held after it was received (`hold_next`: the platform has the
message, the sender never hears back — a worker killed mid-send). Discord's enforced nonce
is honoured as Discord does: the same nonce returns the message already created.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

_ROUTES = (
    ("telegram", "POST", re.compile(r"^/bot[^/]+/sendMessage$")),
    ("slack", "POST", re.compile(r"^/chat\.postMessage$")),
    ("discord_original", "PATCH", re.compile(r"^/webhooks/[^/]+/[^/]+/messages/@original$")),
    ("discord_followup", "POST", re.compile(r"^/webhooks/[^/]+/[^/]+$")),
    ("discord_channel", "POST", re.compile(r"^/channels/[^/]+/messages$")),
    ("twilio", "POST", re.compile(r"^/2010-04-01/Accounts/[^/]+/Messages\.json$")),
    ("webhook", "POST", re.compile(r"^/hooks/reply$")),
    ("whatsapp", "POST", re.compile(r"^/[^/]+/messages$")),
    # An API that echoes who you are (as GitHub's GET /user does): here, the token itself.
    ("echo", "GET", re.compile(r"^/echo$")),
)


# What the WhatsApp Cloud API refuses (tests/fixtures/whatsapp/ has the accepted shapes).
_WA_MEDIA = ("audio", "image", "video", "document")


def whatsapp_problem(body: dict[str, Any]) -> str | None:
    """Why the Cloud API would refuse this message body, or None."""
    kind = body.get("type")
    if body.get("messaging_product") != "whatsapp" or not body.get("to"):
        return "messaging_product and to are required"
    if kind == "text":
        return None if body.get("text", {}).get("body") else "text.body is required"
    if kind in _WA_MEDIA:
        media = body.get(str(kind)) or {}
        if bool(media.get("link")) == bool(media.get("id")):
            return f"{kind} needs exactly one of link or id"
        if "voice" in media and kind != "audio":
            return "voice is for audio only"
        return None
    if kind != "interactive":
        return f"unsupported type {kind!r}"
    interactive = body.get("interactive") or {}
    text = (interactive.get("body") or {}).get("text") or ""
    action = interactive.get("action") or {}
    if interactive.get("type") == "button":
        buttons = action.get("buttons") or []
        titles = [b["reply"]["title"] for b in buttons]
        if not 1 <= len(buttons) <= 3 or any(len(t) > 20 for t in titles):
            return "1 to 3 reply buttons, titles of at most 20 characters"
        return None if 0 < len(text) <= 1024 else "a button message's body is 1 to 1024"
    if interactive.get("type") == "list":
        rows = [row for section in action.get("sections") or [] for row in section["rows"]]
        if not 1 <= len(rows) <= 10 or any(len(r["title"]) > 24 for r in rows):
            return "1 to 10 list rows, titles of at most 24 characters"
        if not 0 < len(action.get("button") or "") <= 20:
            return "a list's button label is 1 to 20 characters"
        return None if 0 < len(text) <= 4096 else "a list message's body is 1 to 4096"
    return f"unsupported interactive type {interactive.get('type')!r}"


@dataclass
class Received:
    kind: str
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float  # time.monotonic() when it arrived


@dataclass
class Failure:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class FakePlatforms:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.messages: list[Received] = []  # what a person would see: one per message made
        self._failures: dict[str, deque[Failure]] = defaultdict(deque)
        self._holds: dict[str, int] = defaultdict(int)
        self.held = threading.Event()  # set once a held request has arrived
        self._release = threading.Event()
        self._nonces: dict[str, dict[str, Any]] = {}
        self._webhook_ids: set[str] = set()
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()
        # Called with each request as it arrives, before it is answered: the sender waits
        # while it runs, so it sees the world as it was when the message reached us.
        self.on_request: Callable[[Received], None] | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakePlatforms:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    # -- scripting ---------------------------------------------------------------------------

    def fail_next(self, kind: str, status: int, body: dict[str, Any], **headers: str) -> None:
        self._failures[kind].append(Failure(status, body, headers))

    def hold_next(self, kind: str) -> None:
        """Take the next such message, then never answer (until the fake shuts down)."""
        self._holds[kind] += 1

    def of(self, kind: str) -> list[Received]:
        return [m for m in self.messages if m.kind == kind]

    # -- the platforms -----------------------------------------------------------------------

    def _answer(self, request: Received) -> tuple[int, dict[str, Any], dict[str, str]]:
        if self.on_request is not None:
            self.on_request(request)
        with self._lock:
            self.requests.append(request)
            failures = self._failures[request.kind]
            if failures:
                failure = failures.popleft()
                return failure.status, failure.body, failure.headers
            problem = whatsapp_problem(request.body) if request.kind == "whatsapp" else None
            if problem is not None:
                # The Cloud API's answer to a body it will not send (#131009, invalid value).
                error = {"message": problem, "type": "OAuthException", "code": 131009}
                return 400, {"error": error}, {}
            created = self._create(request)
            hold = self._holds[request.kind] > 0
            if hold:
                self._holds[request.kind] -= 1
        if hold:
            self.held.set()
            self._release.wait()
        return 200, created, {}

    def _create(self, request: Received) -> dict[str, Any]:
        """Make the message (or find the one a nonce names) and answer like the platform."""
        body, kind = request.body, request.kind
        if kind == "echo":
            return {"authorization": request.headers.get("authorization")}
        if kind == "discord_channel" and body.get("enforce_nonce") and body.get("nonce"):
            known = self._nonces.get(str(body["nonce"]))
            if known is not None:
                return known
        if kind == "webhook":
            webhook_id = request.headers.get("webhook-id", "")
            if webhook_id in self._webhook_ids:
                return {"duplicate": True}
            self._webhook_ids.add(webhook_id)
        number = next(self._ids)
        self.messages.append(request)
        answers: dict[str, dict[str, Any]] = {
            "telegram": {"ok": True, "result": {"message_id": number, "text": body.get("text")}},
            "slack": {"ok": True, "channel": body.get("channel"), "ts": f"1700000000.{number}"},
            "whatsapp": {"messaging_product": "whatsapp", "messages": [{"id": f"wamid.{number}"}]},
            "twilio": {"sid": f"SM{number:032d}", "status": "queued"},
            "webhook": {"received": True},
        }
        answer = answers.get(kind, {"id": str(number), "content": body.get("content")})
        if kind == "discord_channel" and body.get("nonce"):
            self._nonces[str(body["nonce"])] = answer
        return answer

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def _serve(self, method: str) -> None:
                url = urlsplit(self.path)
                kind = next((k for k, m, rx in _ROUTES if m == method and rx.match(url.path)), None)
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if kind is None:
                    self._reply(404, {"error": f"the fake has no {method} {url.path}"})
                    return
                content_type = self.headers.get("content-type", "")
                if "json" in content_type:
                    body = json.loads(raw or b"{}")
                else:
                    body = dict(parse_qsl(raw.decode()))
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = Received(kind, method, url.path, headers, body, time.monotonic())
                self._reply(*fake._answer(request))

            def _reply(
                self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender is gone (killed mid-send): nobody to answer

            def log_message(self, *_: Any) -> None:
                pass

        return Handler
