"""A loopback fake of one Gmail mailbox behind the Gmail API, and Google's OAuth token
endpoint, for the real client (nexus/adapters/gmail_api.py) to talk to over httpx.

It keeps a mailbox: messages (RFC 822 bytes, labels, thread), a history of what was added
with increasing ids, the watch, and what was sent. Answers have the shapes of the recorded
payloads in tests/fixtures/gmail/. A test can expire the history (history.list answers
404 for older ids, as Gmail does after about a week), script failures, serve a body
verbatim, and hold history requests until several have arrived (two syncs listing at the
same moment, by order rather than by timing).
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CLIENT_ID = "1234-fake.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-fake-client-secret-5d1e"
REFRESH_TOKEN = "1//0fake-refresh-token-9c2b"
API = "/gmail/v1/users/me"
WEEK_MS = 7 * 24 * 60 * 60 * 1000


@dataclass
class Stored:
    id: str
    thread_id: str
    labels: list[str]
    raw: bytes
    history_id: int
    internal_date: int


@dataclass
class Call:
    kind: str
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGmail:
    address: str = "bot@example.com"
    now_ms: int = 1_767_225_600_000
    token_lifetime_s: int = 3599
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, Stored] = field(default_factory=dict)
    history: list[tuple[int, str]] = field(default_factory=list)  # (history id, message id)
    history_id: int = 100_000
    oldest_history: int = 0  # history.list answers 404 for a start below this
    watches: list[dict[str, Any]] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)
    issued: list[str] = field(default_factory=list)  # every access token ever given
    deleted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._ids = itertools.count(0x18C0000000000001)
        self._token_numbers = itertools.count(1)
        self._failures: dict[str, deque[tuple[int, dict[str, Any]]]] = defaultdict(deque)
        self._verbatim: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._gate: threading.Barrier | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- life -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    def __enter__(self) -> FakeGmail:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._gate is not None:
            self._gate.abort()
        self._server.shutdown()
        self._server.server_close()

    # --- the mailbox ------------------------------------------------------------------------

    def deliver(
        self, raw: bytes, *, thread_id: str | None = None, labels: tuple[str, ...] = ("INBOX",)
    ) -> str:
        """Mail arrives: a message, and a messageAdded history record after the others."""
        with self._lock:
            return self._add(raw, thread_id, list(labels))

    def _add(self, raw: bytes, thread_id: str | None, labels: list[str]) -> str:
        message_id = f"{next(self._ids):x}"
        self.history_id += 7  # history ids grow with gaps, as Gmail's do
        self.now_ms += 1000
        self.messages[message_id] = Stored(
            message_id, thread_id or message_id, labels, raw, self.history_id, self.now_ms
        )
        self.history.append((self.history_id, message_id))
        return message_id

    def expire_history(self) -> None:
        """Forget the history before now: a start older than the current id answers 404."""
        self.oldest_history = self.history_id

    def delete(self, message_id: str) -> None:
        """The person deletes it: messages.get answers 404, its history record stays."""
        self.deleted.add(message_id)

    def sent(self) -> list[Stored]:
        return [m for m in self.messages.values() if "SENT" in m.labels]

    def of(self, kind: str) -> list[Call]:
        return [call for call in self.calls if call.kind == kind]

    # --- scripting --------------------------------------------------------------------------

    def fail_next(self, kind: str, status: int, body: dict[str, Any] | None = None) -> None:
        self._failures[kind].append((status, body or {"error": {"code": status}}))

    def serve_next(self, kind: str, body: dict[str, Any]) -> None:
        """Answer the next such request with `body` as is (a recorded payload)."""
        self._verbatim[kind].append(body)

    def gate_history(self, parties: int) -> None:
        """Hold history.list requests until `parties` of them have arrived."""
        self._gate = threading.Barrier(parties, timeout=30)

    # --- the API ----------------------------------------------------------------------------

    def _route(self, method: str, path: str) -> str | None:
        routes = {
            ("POST", "/token"): "token",
            ("GET", f"{API}/history"): "history",
            ("GET", f"{API}/messages"): "list",
            ("GET", f"{API}/profile"): "profile",
            ("POST", f"{API}/watch"): "watch",
            ("POST", f"{API}/messages/send"): "send",
        }
        if (method, path) in routes:
            return routes[(method, path)]
        if method == "GET" and path.startswith(f"{API}/messages/"):
            return "get"
        return None

    def _answer(self, call: Call) -> tuple[int, dict[str, Any]]:
        if call.kind == "history" and self._gate is not None:
            self._gate.wait()
        with self._lock:
            self.calls.append(call)
            if self._failures[call.kind]:
                return self._failures[call.kind].popleft()
            if call.kind == "token":
                return self._token(call.body)
            if call.headers.get("authorization", "").removeprefix("Bearer ") not in self.tokens:
                return 401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}}
            if self._verbatim[call.kind]:
                return 200, self._verbatim[call.kind].popleft()
            answer: tuple[int, dict[str, Any]] = getattr(self, f"_{call.kind}")(call)
            return answer

    def revoke_tokens(self) -> None:
        """Every access token given so far stops working (as when one expires early)."""
        with self._lock:
            self.tokens.clear()

    def _token(self, form: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        expected = {
            "grant_type": "refresh_token",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "refresh_token": REFRESH_TOKEN,
        }
        if any(form.get(key) != value for key, value in expected.items()):
            return 400, {"error": "invalid_grant", "error_description": "Bad Request"}
        token = f"ya29.fake-access-{next(self._token_numbers)}-a1b2c3"
        self.tokens.add(token)
        self.issued.append(token)
        return 200, {
            "access_token": token,
            "expires_in": self.token_lifetime_s,
            "scope": "https://www.googleapis.com/auth/gmail.modify",
            "token_type": "Bearer",
        }

    def _history(self, call: Call) -> tuple[int, dict[str, Any]]:
        start = int(call.query["startHistoryId"][0])
        if start < self.oldest_history:
            return 404, {"error": {"code": 404, "message": "Requested entity was not found."}}
        label = call.query.get("labelId", [None])[0]
        size = int(call.query.get("maxResults", ["100"])[0])
        offset = int(call.query.get("pageToken", ["0"])[0])
        records = [
            (hid, mid)
            for hid, mid in self.history
            if hid > start and (label is None or label in self.messages[mid].labels)
        ]
        page = records[offset : offset + size]
        body: dict[str, Any] = {"historyId": str(self.history_id)}
        if page:
            body["history"] = [
                {
                    "id": str(hid),
                    "messages": [{"id": mid, "threadId": self.messages[mid].thread_id}],
                    "messagesAdded": [
                        {
                            "message": {
                                "id": mid,
                                "threadId": self.messages[mid].thread_id,
                                "labelIds": self.messages[mid].labels,
                            }
                        }
                    ],
                }
                for hid, mid in page
            ]
        if offset + size < len(records):
            body["nextPageToken"] = str(offset + size)
        return 200, body

    def _get(self, call: Call) -> tuple[int, dict[str, Any]]:
        wanted = call.path.rsplit("/", 1)[-1]
        found = self.messages.get(wanted)
        if found is None or wanted in self.deleted:
            return 404, {"error": {"code": 404, "message": "Requested entity was not found."}}
        return 200, {
            "id": found.id,
            "threadId": found.thread_id,
            "labelIds": found.labels,
            "snippet": "",
            "sizeEstimate": len(found.raw),
            "historyId": str(found.history_id),
            "internalDate": str(found.internal_date),
            "raw": base64.urlsafe_b64encode(found.raw).decode(),
        }

    def _list(self, call: Call) -> tuple[int, dict[str, Any]]:
        label = call.query.get("labelIds", [None])[0]
        limit = int(call.query.get("maxResults", ["100"])[0])
        after_ms = 0
        for term in call.query.get("q", [""])[0].split():
            if term.startswith("after:"):
                after_ms = int(term.removeprefix("after:")) * 1000
        found = [
            m
            for m in sorted(self.messages.values(), key=lambda m: -m.internal_date)
            if (label is None or label in m.labels) and m.internal_date > after_ms
        ]
        return 200, {
            "messages": [{"id": m.id, "threadId": m.thread_id} for m in found[:limit]],
            "resultSizeEstimate": len(found),
        }

    def _profile(self, call: Call) -> tuple[int, dict[str, Any]]:
        return 200, {
            "emailAddress": self.address,
            "messagesTotal": len(self.messages),
            "threadsTotal": len({m.thread_id for m in self.messages.values()}),
            "historyId": str(self.history_id),
        }

    def _watch(self, call: Call) -> tuple[int, dict[str, Any]]:
        self.watches.append(call.body)
        return 200, {"historyId": str(self.history_id), "expiration": str(self.now_ms + WEEK_MS)}

    def _send(self, call: Call) -> tuple[int, dict[str, Any]]:
        raw = base64.urlsafe_b64decode(call.body["raw"])
        thread = call.body.get("threadId")
        message_id = self._add(raw, thread, ["SENT"])
        return 200, {"id": message_id, "threadId": thread or message_id, "labelIds": ["SENT"]}

    def sent_headers(self, stored: Stored) -> dict[str, str]:
        parsed = message_from_bytes(stored.raw, policy=policy.default)
        return {key: str(value) for key, value in parsed.items()}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def _serve(self, method: str) -> None:
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                kind = fake._route(method, url.path)
                if kind is None:
                    self._reply(404, {"error": f"the fake has no {method} {url.path}"})
                    return
                if "json" in self.headers.get("content-type", ""):
                    body: Any = json.loads(raw or b"{}")
                else:
                    body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                headers = {k.lower(): v for k, v in self.headers.items()}
                call = Call(kind, method, url.path, parse_qs(url.query), headers, body)
                try:
                    self._reply(*fake._answer(call))
                except threading.BrokenBarrierError:
                    self._reply(503, {"error": "the test stopped waiting"})

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler
