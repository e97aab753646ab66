"""A loopback fake of the Anthropic Messages API, scripted answer by answer.

The real `anthropic` SDK talks to it through `base_url`, so its retries, SSE parsing and
error classes run exactly as in production. Answers come from a FIFO script; a request
with nothing scripted gets a 500 that names it (and tells the SDK not to retry), so a test
fails loudly instead of hanging. Streams use named SSE events only: the SDK drops the rest.

Prompt caching is accounted honestly (tests/fakes/prompt_cache.py): every request's cache
read and write are recorded in `cache_accounts`, and an answer scripted without token
counts reports them as its usage.
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.prompt_cache import CacheAccount, PromptCache

Event = tuple[str, dict[str, Any]]
"""One SSE frame: the `event:` name and the `data:` JSON."""

DEFAULT_MODEL = "claude-sonnet-4-5-20250929"
_ids = itertools.count(1)


@dataclass
class Received:
    """One request as the fake saw it (header names lower-cased)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Answer:
    """One scripted answer: an SSE stream (`events`), or `status` with a JSON `body`."""

    events: list[Event] = field(default_factory=list)
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # pause before each frame after the first
    hang_s: float = 0.0  # pause before answering at all
    # Report the fake's own prompt-cache accounting as message_start's usage.
    honest_usage: bool = False


Script = Answer | Callable[[Received], Answer]


# -- the wire format, frame by frame ---------------------------------------------------------


def message_start(
    *,
    model: str = DEFAULT_MODEL,
    input_tokens: int = 25,
    cache_read: int = 0,
    cache_write: int = 0,
) -> Event:
    message: dict[str, Any] = {
        "id": f"msg_fake{next(_ids):016d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
    return ("message_start", {"type": "message_start", "message": message})


def _block_start(index: int, block: dict[str, Any]) -> Event:
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def _block_delta(index: int, delta: dict[str, Any]) -> Event:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def _block_stop(index: int) -> Event:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def text_block(index: int, text: str, *, chunks: int = 3) -> list[Event]:
    """A text block whose text arrives in about `chunks` text_delta pieces."""
    deltas = [_block_delta(index, {"type": "text_delta", "text": p}) for p in _split(text, chunks)]
    return [_block_start(index, {"type": "text", "text": ""}), *deltas, _block_stop(index)]


def tool_use_block(index: int, tool_id: str, name: str, raw_input: str) -> list[Event]:
    """A tool_use block; like the API, the input JSON opens with an empty fragment."""
    start = _block_start(index, {"type": "tool_use", "id": tool_id, "name": name, "input": {}})
    half = max(1, len(raw_input) // 2)
    pieces = ["", raw_input[:half], raw_input[half:]]
    deltas = [_block_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in pieces]
    return [start, *deltas, _block_stop(index)]


def thinking_block(index: int, thinking: str, signature: str = "sig_fake") -> list[Event]:
    start = _block_start(index, {"type": "thinking", "thinking": "", "signature": ""})
    return [
        start,
        _block_delta(index, {"type": "thinking_delta", "thinking": thinking}),
        _block_delta(index, {"type": "signature_delta", "signature": signature}),
        _block_stop(index),
    ]


def redacted_thinking_block(index: int, data: str) -> list[Event]:
    """Thinking the API encrypted: it comes whole in its start event, with no deltas."""
    return [_block_start(index, {"type": "redacted_thinking", "data": data}), _block_stop(index)]


def message_end(stop_reason: str, output_tokens: int) -> list[Event]:
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    usage = {"output_tokens": output_tokens}
    return [
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}),
        ("message_stop", {"type": "message_stop"}),
    ]


def with_ping(events: Sequence[Event]) -> list[Event]:
    """The API sends one `ping` right after the first content_block_start."""
    out = list(events)
    for position, (name, _) in enumerate(out):
        if name == "content_block_start":
            out.insert(position + 1, ("ping", {"type": "ping"}))
            break
    return out


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": f"req_fake{next(_ids):016d}",
    }


def _retry_hint(status: int) -> str:
    # What the real API sends in `x-should-retry`, which the SDK obeys over its own rules.
    return "true" if status in (408, 409, 429) or status >= 500 else "false"


def assemble(events: Sequence[Event]) -> dict[str, Any]:
    """The non-streaming Message JSON that the same answer would have been."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for name, data in events:
        if name == "message_start":
            message = copy.deepcopy(data["message"])
        elif name == "content_block_start":
            blocks[data["index"]] = copy.deepcopy(data["content_block"])
        elif name == "content_block_delta":
            _fold_delta(blocks[data["index"]], data["delta"], partial, data["index"])
        elif name == "message_delta":
            message.update(data["delta"])
            message["usage"] = {**message.get("usage", {}), **data["usage"]}
    for index, raw in partial.items():
        blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _fold_delta(
    block: dict[str, Any], delta: dict[str, Any], partial: dict[int, str], index: int
) -> None:
    kind = delta["type"]
    if kind == "text_delta":
        block["text"] += delta["text"]
    elif kind == "input_json_delta":
        partial[index] = partial.get(index, "") + delta["partial_json"]
    elif kind == "thinking_delta":
        block["thinking"] += delta["thinking"]
    elif kind == "signature_delta":
        block["signature"] = delta["signature"]


# -- the server ------------------------------------------------------------------------------


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up mid-answer is what abort tests do; anything else is a bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeAnthropicServer:
    """`with FakeAnthropicServer() as fake:`, then point the SDK at `fake.base_url`."""

    def __init__(self, *, model: str = DEFAULT_MODEL) -> None:
        self.model = model
        self.requests: list[Received] = []  # POST /v1/messages, in arrival order
        self.token_counts: list[Received] = []  # POST /v1/messages/count_tokens
        self.prompt_cache = PromptCache()
        self.cache_accounts: list[CacheAccount] = []  # one per entry of `requests`
        self.disconnects = 0  # streams the client closed before their end
        self._disconnected = threading.Event()
        self._closing = threading.Event()
        self._script: deque[Script] = deque()
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeAnthropicServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # wakes hanging and slow answers so they end now
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)

    # -- scripting ---------------------------------------------------------------------------

    def reply(self, answer: Script) -> None:
        """Queue an Answer, or a callable that builds one from the request it answers."""
        with self._lock:
            self._script.append(answer)

    def reply_events(
        self, events: Sequence[Event], *, delay_s: float = 0.0, honest_usage: bool = False
    ) -> None:
        """Queue a hand-made SSE stream (see `message_start`, `text_block`, ...)."""
        self.reply(Answer(events=list(events), delay_s=delay_s, honest_usage=honest_usage))

    def reply_text(
        self,
        text: str,
        *,
        input_tokens: int | None = None,
        output_tokens: int = 12,
        cache_read: int | None = None,
        cache_write: int | None = None,
        chunks: int = 3,
        delay_s: float = 0.0,
    ) -> None:
        """A text answer; without token counts, its usage is the fake's own accounting."""
        honest = input_tokens is None and cache_read is None and cache_write is None
        start = message_start(
            model=self.model,
            input_tokens=25 if input_tokens is None else input_tokens,
            cache_read=cache_read or 0,
            cache_write=cache_write or 0,
        )
        events = [
            start,
            *text_block(0, text, chunks=chunks),
            *message_end("end_turn", output_tokens),
        ]
        self.reply_events(with_ping(events), delay_s=delay_s, honest_usage=honest)

    def reply_tool_uses(
        self,
        calls: Sequence[tuple[str, dict[str, Any]]],
        *,
        text: str | None = None,
        tool_ids: Sequence[str] | None = None,
        input_tokens: int | None = None,
        output_tokens: int = 30,
        delay_s: float = 0.0,
    ) -> list[str]:
        """One answer with an optional text block, then a tool_use block per call (usage:
        the fake's own accounting unless `input_tokens` is given).

        Returns the tool_use ids, so a test can match the tool_result it expects back.
        """
        ids = list(tool_ids) if tool_ids else [f"toolu_fake{next(_ids):016d}" for _ in calls]
        tokens = 40 if input_tokens is None else input_tokens
        events = [message_start(model=self.model, input_tokens=tokens)]
        if text:
            events.extend(text_block(0, text, chunks=2))
        first = 1 if text else 0
        for offset, ((name, tool_input), tool_id) in enumerate(zip(calls, ids, strict=True)):
            events.extend(tool_use_block(first + offset, tool_id, name, json.dumps(tool_input)))
        events.extend(message_end("tool_use", output_tokens))
        self.reply_events(with_ping(events), delay_s=delay_s, honest_usage=input_tokens is None)
        return ids

    def reply_tool_use(
        self,
        name: str,
        tool_input: dict[str, Any],
        *,
        text: str | None = None,
        tool_id: str | None = None,
        delay_s: float = 0.0,
    ) -> str:
        """A tool_use answer (after `text`, if given); returns its tool_use id."""
        ids = [tool_id] if tool_id else None
        return self.reply_tool_uses([(name, tool_input)], text=text, tool_ids=ids, delay_s=delay_s)[
            0
        ]

    def reply_error(
        self, status: int, error_type: str, message: str, *, retry_after_ms: int = 1
    ) -> None:
        """An HTTP error as the API writes it; `retry-after-ms` keeps SDK retries fast."""
        body = error_body(error_type, message)
        headers = {
            "request-id": body["request_id"],
            "retry-after-ms": str(retry_after_ms),
            "x-should-retry": _retry_hint(status),
        }
        self.reply(Answer(status=status, body=body, headers=headers))

    def reply_stream_error(self, text_before: str, error_type: str = "overloaded_error") -> None:
        """A 200 stream: some text, then `event: error` where message_stop would be."""
        message = {"overloaded_error": "Overloaded"}.get(error_type, "Internal server error")
        text = text_block(0, text_before, chunks=2)[:-1]  # the block never closes
        error = ("error", error_body(error_type, message))
        self.reply_events(with_ping([message_start(model=self.model), *text, error]))

    def reply_hang(self, seconds: float) -> None:
        """Accept the request and say nothing for `seconds` (or until the fake closes)."""
        self.reply(Answer(hang_s=seconds))

    def wait_for_disconnect(self, timeout_s: float = 1.0) -> bool:
        """Whether a client closed a stream early within `timeout_s`."""
        return self._disconnected.wait(timeout_s)

    # -- serving -----------------------------------------------------------------------------

    def _answer(self, received: Received) -> Answer:
        with self._lock:
            self.requests.append(received)
            number = len(self.requests)
            self.cache_accounts.append(CacheAccount(0, 0, 0))  # filled in below
            scripted = self._script.popleft() if self._script else None
        answer = (
            None if scripted is None else scripted(received) if callable(scripted) else scripted
        )
        # As the API, a request it refuses writes nothing to the cache.
        served = answer is not None and answer.status == 200 and answer.body is None
        account = self.prompt_cache.account(received.body, write=served)
        with self._lock:
            self.cache_accounts[number - 1] = account
        if answer is None:
            return _unscripted(received, number)
        if answer.honest_usage:
            answer = replace(answer, events=[_with_usage(e, account) for e in answer.events])
        return answer

    def _count_tokens(self, received: Received) -> dict[str, Any]:
        with self._lock:
            self.token_counts.append(received)
        text = json.dumps([received.body.get(k) for k in ("system", "messages", "tools")])
        return {"input_tokens": max(1, len(text) // 4)}  # about four characters a token

    def _note_disconnect(self) -> None:
        with self._lock:
            self.disconnects += 1
        self._disconnected.set()


def _with_usage(event: Event, account: CacheAccount) -> Event:
    name, data = event
    if name != "message_start":
        return event
    usage = {
        **data["message"]["usage"],
        "input_tokens": account.input_tokens,
        "cache_read_input_tokens": account.cache_read,
        "cache_creation_input_tokens": account.cache_write,
    }
    return (name, {**data, "message": {**data["message"], "usage": usage}})


def _unscripted(received: Received, number: int) -> Answer:
    said = json.dumps(received.body.get("messages", []))[-300:]
    message = (
        f"FakeAnthropicServer: no answer scripted for request #{number} "
        f"to {received.path} (messages ending ...{said})"
    )
    return Answer(
        status=500,
        body=error_body("api_error", message),
        headers={"x-should-retry": "false"},  # one loud failure, not three
    )


def _handler_for(fake: FakeAnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            received = Received(
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=json.loads(raw or b"{}"),
            )
            path = self.path.split("?", 1)[0]
            if path == "/v1/messages/count_tokens":
                self._json(200, fake._count_tokens(received), {})
            elif path == "/v1/messages":
                self._serve(fake._answer(received), stream=received.body.get("stream") is True)
            else:
                body = error_body("not_found_error", f"FakeAnthropicServer: no route {path}")
                self._json(404, body, {"x-should-retry": "false"})

        def _serve(self, answer: Answer, *, stream: bool) -> None:
            if answer.hang_s and fake._closing.wait(answer.hang_s):
                return
            if answer.body is not None or answer.status != 200:
                self._json(answer.status, answer.body or {}, answer.headers)
            elif stream:
                self._stream(answer)
            else:
                self._whole(answer)

        def _whole(self, answer: Answer) -> None:
            errors = [data for name, data in answer.events if name == "error"]
            if errors:
                self._json(529 if "overloaded" in json.dumps(errors[0]) else 500, errors[0], {})
            else:
                self._json(200, assemble(answer.events), answer.headers)

        def _json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", headers.get("request-id", "req_fake"))
            for name, value in headers.items():
                if name != "request-id":
                    self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, answer: Answer) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("request-id", "req_fake")
            self.send_header("connection", "close")  # the body ends when the stream does
            self.end_headers()
            self.close_connection = True
            try:
                for position, (name, data) in enumerate(answer.events):
                    if position and answer.delay_s and fake._closing.wait(answer.delay_s):
                        return
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
            except ConnectionError:  # BrokenPipe / ConnectionReset: the client hung up
                fake._note_disconnect()

    return Handler
