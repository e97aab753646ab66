"""Server-sent events for the CLI: the wire format parsed line by line (pure), and a reader
that follows a session's stream across reconnects, resuming with `Last-Event-ID` so no
event is missed or seen twice."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

# What a client waits before reconnecting when the server named no `retry` (the spec's
# suggestion is "a few seconds").
DEFAULT_RETRY_MS = 2_000


@dataclass(frozen=True)
class ServerEvent:
    id: str | None
    event: str
    data: str


@dataclass
class SseParser:
    """The event-stream format (WHATWG HTML, "Server-sent events"), fed one line at a time
    without its line ending; a blank line dispatches the event gathered so far."""

    retry_ms: int | None = None
    # Where a reconnect resumes: the id of the last event dispatched, never of one half
    # received (its id line comes first; resuming after it would skip it).
    last_event_id: str | None = None
    _id: str | None = field(default=None, init=False)
    _event: str = field(default="", init=False)
    _data: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._id = self.last_event_id

    def drop_partial(self) -> None:
        """Forget an event cut off by a dropped connection: it comes again on resume."""
        self._id, self._event, self._data = self.last_event_id, "", []

    def feed(self, line: str) -> ServerEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: the server's keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None  # unknown fields are ignored, as the format says

    def _dispatch(self) -> ServerEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        self.last_event_id = self._id
        if not data:
            return None
        return ServerEvent(id=self._id, event=event or "message", data="\n".join(data))


class StreamRefused(Exception):
    """The server answered the stream request with an error (the session does not exist,
    a bad token): reconnecting would not help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _refusal(response: httpx.Response) -> StreamRefused:
    response.read()
    try:
        message = str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        message = response.text
    return StreamRefused(response.status_code, message)


def follow(
    client: httpx.Client,
    path: str,
    *,
    last_event_id: str | None = None,
    on_open: Callable[[], None] | None = None,
    on_reconnect: Callable[[str], None] | None = None,
    sleep: Callable[[float], Any] = time.sleep,
) -> Iterator[ServerEvent]:
    """The stream's events, for as long as the caller reads: when the connection drops
    (or the server ends the stream) it reconnects after the server's `retry` and resumes
    after the last event seen. `on_open` runs once the first connection is established
    (the server has fixed where the stream starts: what happens after is seen);
    `on_reconnect` is told why each reconnect happens. A refusal (4xx) raises
    StreamRefused; a 503 (the stream store is away) is retried like a drop."""
    parser = SseParser(last_event_id=last_event_id)
    opened = False
    while True:
        headers = {"Accept": "text/event-stream"}
        if parser.last_event_id is not None:
            headers["Last-Event-ID"] = parser.last_event_id
        why = "the server ended the stream"
        try:
            with client.stream("GET", path, headers=headers) as response:
                if response.status_code != 200:
                    refused = _refusal(response)
                    if response.status_code != 503:
                        raise refused
                    why = f"503: {refused.message}"
                else:
                    if not opened and on_open is not None:
                        on_open()
                    opened = True
                    for line in response.iter_lines():
                        found = parser.feed(line)
                        if found is not None:
                            yield found
        except httpx.TransportError as error:
            why = f"the connection dropped ({type(error).__name__})"
        parser.drop_partial()
        if on_reconnect is not None:
            on_reconnect(why)
        sleep((parser.retry_ms if parser.retry_ms is not None else DEFAULT_RETRY_MS) / 1000)
