"""A loopback fake of the platforms' file downloads: Telegram getFile and its file URL,
Slack's url_private, WhatsApp Cloud's media lookup and media URL, behind one base URL.

Files are put in with `add`; every request is recorded (path, query and headers), so a
test can see which token went where. `no_length` serves a file with no Content-Length
(its size is known only once read); `slow_s` trickles it out a byte at a time.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

TELEGRAM_TOKEN = "123456:telegram-secret-token"
BEARER = "xoxb-and-meta-test-token"


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class Stored:
    data: bytes
    content_type: str
    no_length: bool = False
    slow_s: float = 0.0


class FakeFiles:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.files: dict[str, Stored] = {}  # by file id (Telegram, WhatsApp) or path (Slack)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeFiles:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, key: str, data: bytes, content_type: str, **options: Any) -> None:
        self.files[key] = Stored(data, content_type, **options)

    def _answer(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Any:
        """(status, JSON) for a lookup; a Stored for a download; None for a 404."""
        bearer = headers.get("authorization") == f"Bearer {BEARER}"
        if path == f"/bot{TELEGRAM_TOKEN}/getFile":
            stored = self.files.get(query.get("file_id", ""))
            if stored is None:
                return 400, {"ok": False, "description": "Bad Request: invalid file_id"}
            found = {"file_id": query["file_id"], "file_path": f"photos/{query['file_id']}.jpg"}
            return 200, {"ok": True, "result": {**found, "file_size": len(stored.data)}}
        if path.startswith(f"/file/bot{TELEGRAM_TOKEN}/photos/"):
            return self.files.get(path.rsplit("/", 1)[-1].removesuffix(".jpg"))
        if path.startswith("/graph/") and bearer:
            media_id = path.removeprefix("/graph/")
            if media_id not in self.files:
                return 404, {"error": {"message": "no such media"}}
            url = f"{self.base_url}/media/{media_id}"
            return 200, {"url": url, "mime_type": self.files[media_id].content_type, "id": media_id}
        if path.startswith("/media/") and bearer:
            return self.files.get(path.removeprefix("/media/"))
        if path.startswith("/files-pri/") and bearer:
            return self.files.get(path)
        return 401, {"error": "unauthorized"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                query = dict(parse_qsl(url.query))
                fake.seen.append(Seen(url.path, query, headers))
                answer = fake._answer(url.path, query, headers)
                if answer is None:
                    self._json(404, {"error": "no such file"})
                elif isinstance(answer, Stored):
                    self._file(answer)
                else:
                    self._json(*answer)

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _file(self, stored: Stored) -> None:
                self.send_response(200)
                self.send_header("Content-Type", stored.content_type)
                if not stored.no_length:
                    self.send_header("Content-Length", str(len(stored.data)))
                self.end_headers()
                if stored.slow_s:
                    for byte in stored.data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(stored.slow_s)
                else:
                    self.wfile.write(stored.data)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler
