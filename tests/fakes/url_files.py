"""A loopback HTTP server of fixed files, recording every request it gets: where a reply's
attachment is downloaded from in tests."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FileServer:
    """Serves `files` (path → (bytes, content type)); any other path is 404, and a path in
    `status` is answered with that status and no body."""

    def __init__(self, files: dict[str, tuple[bytes, str]]) -> None:
        self.files = dict(files)
        self.status: dict[str, int] = {}
        self.hits: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                headers = {key.lower(): value for key, value in self.headers.items()}
                server.hits.append({"path": self.path, **headers})
                found = server.files.get(self.path)
                status = server.status.get(self.path, 200 if found else 404)
                body, kind = found if found and status == 200 else (b"", "text/plain")
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
