"""A loopback fake of a BlueBubbles server's REST API (iMessage on a Mac).

It checks the server password in the `password` (or `guid`, `token`) query parameter as
BlueBubbles does, answers in its `{"status", "message", "data"}` envelope, and keeps what
a person would see: texts and files per chat GUID, tapbacks, typing. A tempGuid still
being sent is refused as BlueBubbles refuses it ("already queued"). Each kind of request
can be scripted to fail (`fail_next`) or to be held after it was received (`hold_next`).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

_ROUTES = (
    ("text", "POST", re.compile(r"^/api/v1/message/text$")),
    ("attachment", "POST", re.compile(r"^/api/v1/message/attachment$")),
    ("react", "POST", re.compile(r"^/api/v1/message/react$")),
    ("typing", "POST", re.compile(r"^/api/v1/chat/(?P<chat>[^/]+)/typing$")),
    ("typing", "DELETE", re.compile(r"^/api/v1/chat/(?P<chat>[^/]+)/typing$")),
    ("download", "GET", re.compile(r"^/api/v1/attachment/(?P<guid>[^/]+)/download$")),
    ("ping", "GET", re.compile(r"^/api/v1/ping$")),
)


@dataclass
class Call:
    kind: str
    method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any]
    files: dict[str, tuple[str, bytes, str]] = field(default_factory=dict)
    chat: str | None = None  # the chat GUID in the path (typing)


@dataclass
class Answer:
    status: int
    body: dict[str, Any] | bytes
    content_type: str = "application/json"


def _error(status: int, message: str, error: str) -> Answer:
    return Answer(status, {"status": status, "message": message,
                           "error": {"type": "Error", "message": error}})  # fmt: skip


class FakeBlueBubbles:
    def __init__(self, password: str) -> None:
        self.password = password
        self.calls: list[Call] = []
        self.sent: list[Call] = []  # texts and files that reached a chat, in order
        self.files: dict[str, tuple[bytes, str]] = {}  # attachment guid → (bytes, mime type)
        self._failures: dict[str, deque[Answer]] = defaultdict(deque)
        self._holds: dict[str, int] = defaultdict(int)
        self._queued: set[str] = set()  # tempGuids being sent now
        self.held = threading.Event()
        self._release = threading.Event()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeBlueBubbles:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    # -- scripting ---------------------------------------------------------------------------

    def fail_next(self, kind: str, status: int, error: str) -> None:
        self._failures[kind].append(_error(status, "Error", error))

    def hold_next(self, kind: str) -> None:
        """Take the next such request, then answer only once the fake shuts down."""
        self._holds[kind] += 1

    def release(self) -> None:
        """Answer the held requests now."""
        self._release.set()

    def texts(self, chat_guid: str | None = None) -> list[str]:
        return [
            str(c.body.get("message"))
            for c in self.sent
            if c.kind == "text" and chat_guid in (None, c.body.get("chatGuid"))
        ]

    def of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]

    # -- the server --------------------------------------------------------------------------

    def _answer(self, call: Call) -> Answer:
        with self._lock:
            self.calls.append(call)
            given = call.query.get("guid") or call.query.get("password") or call.query.get("token")
            if not given:
                return _error(401, "You are not authorized", "Missing server password!")
            if given != self.password:
                return _error(401, "You are not authorized", "You are not authorized")
            failures = self._failures[call.kind]
            if failures:
                return failures.popleft()
            temp = str(call.body.get("tempGuid") or "")
            if call.kind in ("text", "attachment"):
                if temp in self._queued:
                    return _error(400, "Bad request", f"Message is already queued to be sent! "
                                  f"(Temp GUID: {temp})")  # fmt: skip
                if not call.body.get("chatGuid") or not temp:
                    return _error(400, "Bad request", "chatGuid and tempGuid are required")
                self._queued.add(temp)
            hold = self._holds[call.kind] > 0
            if hold:
                self._holds[call.kind] -= 1
        if hold:
            self.held.set()
            self._release.wait()
        with self._lock:
            self._queued.discard(temp)
            return self._made(call)

    def _made(self, call: Call) -> Answer:
        if call.kind == "ping":
            return Answer(200, {"status": 200, "message": "Ping received!", "data": "pong"})
        if call.kind == "download":
            found = self.files.get(str(call.body.get("guid")))
            if found is None:
                return _error(404, "Not found", "Attachment does not exist!")
            return Answer(200, found[0], found[1])
        if call.kind in ("text", "attachment"):
            self.sent.append(call)
            guid = f"FAKE-{next(self._ids):04d}"
            data = {"guid": guid, "tempGuid": call.body.get("tempGuid"), "isFromMe": True,
                    "text": call.body.get("message"),
                    "chats": [{"guid": call.body.get("chatGuid")}]}  # fmt: skip
            return Answer(200, {"status": 200, "message": "Message sent!", "data": data})
        return Answer(200, {"status": 200, "message": "Success"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def _serve(self, method: str) -> None:
                url = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                found = next(
                    ((k, m) for k, verb, rx in _ROUTES if verb == method
                     for m in [rx.match(url.path)] if m),
                    None,
                )  # fmt: skip
                if found is None:
                    self._reply(_error(404, "Not found", f"no {method} {url.path}"))
                    return
                kind, match = found
                body, files = _read(self.headers.get("content-type", ""), raw)
                groups = {k: unquote(v) for k, v in match.groupdict().items()}
                if "guid" in groups:
                    body["guid"] = groups["guid"]
                call = Call(kind, method, url.path, dict(parse_qsl(url.query)), body, files,
                            groups.get("chat"))  # fmt: skip
                self._reply(fake._answer(call))

            def _reply(self, answer: Answer) -> None:
                body = answer.body
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("content-type", answer.content_type)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller is gone

            def log_message(self, *_: Any) -> None:
                pass

        return Handler


Files = dict[str, tuple[str, bytes, str]]  # field → (file name, bytes, content type)


def _read(content_type: str, raw: bytes) -> tuple[dict[str, Any], Files]:
    """A JSON body, or a multipart form's fields and files (name, bytes, content type)."""
    if "json" in content_type:
        return json.loads(raw or b"{}"), {}
    if content_type.startswith("multipart/form-data"):
        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        fields: dict[str, Any] = {}
        files: Files = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            decoded = part.get_payload(decode=True)
            payload = decoded if isinstance(decoded, bytes) else b""
            filename = part.get_filename()
            if filename is not None:
                files[str(name)] = (filename, payload, part.get_content_type())
            else:
                fields[str(name)] = payload.decode()
        return fields, files
    return dict(parse_qsl(raw.decode())), {}
