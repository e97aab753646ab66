"""/v1 bodies: the caller is authenticated from headers before a byte of the body is read,
and no body over NEXUS_MAX_BODY_BYTES is ever held, declared or streamed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
from fastapi import FastAPI

from nexus.api.app import create_app
from nexus.bootstrap import bootstrap
from nexus.db import Database
from nexus.doorbell import RecordingDoorbell
from nexus.settings import Settings

TOKEN = "tok-hostile"
LIMIT = 64 * 1024
CHUNK = 16 * 1024
HOSTILE = 80 * 1024 * 1024  # what an attacker would send; only what is pulled counts


class Sent:
    """An ASGI exchange that counts the body bytes the app pulled from the client."""

    def __init__(self, total: int, chunked: bool) -> None:
        self.total, self.chunked, self.pulled = total, chunked, 0
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self._chunks = self._produce()

    def _produce(self) -> Iterator[dict[str, Any]]:
        left = self.total
        while left > 0:
            size = min(CHUNK, left)
            left -= size
            self.pulled += size
            yield {"type": "http.request", "body": b"x" * size, "more_body": left > 0}
        yield {"type": "http.disconnect"}

    async def receive(self) -> dict[str, Any]:
        return next(self._chunks, {"type": "http.disconnect"})

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            self.body += message.get("body", b"")


def _exchange(
    app: FastAPI, path: str, total: int, *, token: str | None, chunked: bool = False
) -> Sent:
    sent = Sent(total, chunked)
    headers = [(b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if not chunked:
        headers.append((b"content-length", str(total).encode()))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": headers, "client": ("10.0.0.9", 5000),
        "server": ("testserver", 80),
    }  # fmt: skip
    asyncio.run(app(scope, sent.receive, sent.send))
    return sent


@pytest.fixture
def app(database: Database) -> FastAPI:
    settings = Settings(api_tokens=TOKEN, max_body_bytes=LIMIT, telegram_secret_token="s")
    return create_app(bootstrap(settings, database=database, doorbell=RecordingDoorbell()))


BODY_ROUTES = ["/v1/events", "/v1/sessions", "/v1/sessions/main/messages", "/v1/route"]


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_an_unauthenticated_body_is_refused_before_it_is_read(app: FastAPI, path: str) -> None:
    for chunked in (False, True):
        sent = _exchange(app, path, HOSTILE, token=None, chunked=chunked)
        assert sent.status == 401, sent.body
        assert sent.headers["www-authenticate"] == "Bearer"
        assert sent.pulled == 0  # the token is checked from the headers alone


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_a_declared_oversized_body_is_413_before_it_is_read(app: FastAPI, path: str) -> None:
    sent = _exchange(app, path, HOSTILE, token=TOKEN)
    assert sent.status == 413, sent.body
    assert b"payload_too_large" in sent.body and str(LIMIT).encode() in sent.body
    assert sent.pulled == 0


@pytest.mark.parametrize("path", [*BODY_ROUTES, "/v1/inbound/telegram"])
def test_a_streamed_oversized_body_is_abandoned_at_the_limit(app: FastAPI, path: str) -> None:
    sent = _exchange(app, path, HOSTILE, token=TOKEN, chunked=True)
    assert sent.status == 413, sent.body
    assert b"payload_too_large" in sent.body
    assert sent.pulled <= LIMIT + CHUNK


def test_a_body_under_the_limit_still_reaches_the_route(app: FastAPI) -> None:
    sent = _exchange(app, "/v1/sessions", 10, token=TOKEN)
    # Ten bytes of "x" are not JSON: the route parsed the body, so it was let through.
    assert sent.status == 422, sent.body


def test_a_malformed_content_length_is_400(app: FastAPI) -> None:
    sent = Sent(0, chunked=False)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/events", "raw_path": b"/v1/events", "query_string": b"",
        "root_path": "", "client": ("10.0.0.9", 5000), "server": ("testserver", 80),
        "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-length", b"lots")],
    }  # fmt: skip
    asyncio.run(app(scope, sent.receive, sent.send))
    assert sent.status == 400 and b"Content-Length" in sent.body
