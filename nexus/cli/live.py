"""`nexus tail SESSION` and `nexus send --wait`: a session's stream read live (SSE), tokens
printed as they are written, resuming after a dropped connection without a gap."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import typer
from rich.console import Console

from nexus.cli.remote import _call, _client, _segment
from nexus.cli.sse import ServerEvent, StreamRefused, follow
from nexus.settings import Settings

errors = Console(stderr=True, emoji=False)
DELTA = "message.delta"
# A stream is quiet for at most the server's keep-alive (15 s) between two lines.
READ_TIMEOUT_S = 45.0


def _stream_client(settings: Settings) -> httpx.Client:
    client = _client(settings)
    client.timeout = httpx.Timeout(10.0, read=READ_TIMEOUT_S)
    return client


def _stream_path(label: str) -> str:
    return f"/v1/sessions/{_segment(label)}/stream"


def _data(event: ServerEvent) -> dict[str, Any]:
    try:
        found = json.loads(event.data)
    except ValueError:
        return {"data": event.data}
    return found if isinstance(found, dict) else {"data": found}


def _line(event: ServerEvent, data: dict[str, Any]) -> str:
    shown = " ".join(f"{key}={value}" for key, value in data.items())
    return f"{event.id}  {event.event}  {shown}".rstrip()


def _refused(error: StreamRefused) -> typer.Exit:
    errors.print(f"[red]{error.status}[/red]: {error.message}", markup=True, highlight=False)
    return typer.Exit(1)


def _reconnecting(why: str) -> None:
    errors.print(f"reconnecting: {why}", markup=False, highlight=False)


def tail(
    settings: Settings, label: str, *, last_event_id: str | None, count: int | None, as_json: bool
) -> None:
    """Print the session's stream: text deltas as they come, every other event on a line
    of its own; `count` stops after that many events."""
    out = sys.stdout
    seen = 0
    mid_text = False  # deltas printed since the last line ended
    with _stream_client(settings) as client:
        try:
            for event in follow(
                client,
                _stream_path(label),
                last_event_id=last_event_id,
                on_reconnect=_reconnecting,
            ):
                data = _data(event)
                if as_json:
                    out.write(json.dumps({"id": event.id, "event": event.event, "data": data}))
                    out.write("\n")
                elif event.event == DELTA:
                    out.write(str(data.get("text", "")))
                    mid_text = True
                else:
                    if mid_text:
                        out.write("\n")
                        mid_text = False
                    out.write(_line(event, data) + "\n")
                out.flush()
                seen += 1
                if count is not None and seen >= count:
                    break
        except StreamRefused as error:
            raise _refused(error) from error
    if mid_text:
        out.write("\n")
        out.flush()


@dataclass
class _Answer:
    """What the stream has said so far about the turn that is to answer one queue item."""

    item_id: str | None = None
    turn_id: str | None = None  # the turn that consumed the item, once it committed
    refused: str | None = None  # dropped or dead-lettered instead: why
    printed: list[str] = field(default_factory=list)  # the delta text printed

    def see(self, event: ServerEvent, data: dict[str, Any]) -> bool:
        """Take one event; True once the answer is complete (or will never come)."""
        mine = self.item_id is not None and data.get("queue_item_id") == self.item_id
        if event.event == "queue.item.consumed" and mine:
            self.turn_id = str(data["turn_id"])
        elif event.event in ("queue.item.dropped", "queue.item.dead") and mine:
            reason = data.get("reason") or data.get("disposition") or event.event
            self.refused = f"{event.event.removeprefix('queue.item.')}: {reason}"
            return True
        elif event.event == "turn.committed" and self.turn_id is not None:
            return data.get("turn_id") == self.turn_id
        return False


def send_and_stream(
    settings: Settings,
    label: str,
    body: dict[str, Any],
    *,
    timeout_s: float,
    show: Callable[[str], None] | None,
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Queue `body` to the session with its stream already open, hand each text delta to
    `show` as it arrives, and return (what the send answered, the answer: turn id and
    text) once the turn that consumed the message commits. None when the stream cannot
    be had (the caller falls back to polling)."""
    answer = _Answer()
    path = f"/v1/sessions/{_segment(label)}/messages"
    queued: dict[str, Any] = {}
    deadline = time.monotonic() + timeout_s

    def send() -> None:
        with _client(settings) as client:
            queued.update(_call(client, "POST", path, json=body))
        answer.item_id = str(queued["queue_item_id"])

    def give_up_after(deadline: float, timeout_s: float) -> Callable[[str], None]:
        def reconnecting(why: str) -> None:
            if time.monotonic() > deadline:
                errors.print(f"no answer within {timeout_s:.0f} s ({why})", markup=False)
                raise typer.Exit(1)
            _reconnecting(why)

        return reconnecting

    with _stream_client(settings) as client:
        resume: str | None = None
        try:
            client.get(f"/v1/sessions/{_segment(label)}", timeout=10.0).raise_for_status()
        except httpx.HTTPStatusError:
            # A new session has no stream yet: send first, then read it from its beginning,
            # which is all after the send.
            send()
            resume = "0-0"
        except httpx.HTTPError:
            return None
        try:
            for event in follow(
                client,
                _stream_path(label),
                last_event_id=resume,
                on_open=None if queued else send,
                on_reconnect=give_up_after(deadline, timeout_s),
            ):
                data = _data(event)
                if event.event == DELTA and answer.item_id is not None and show is not None:
                    text = str(data.get("text", ""))
                    answer.printed.append(text)
                    show(text)
                if answer.see(event, data):
                    break
                if time.monotonic() > deadline:
                    errors.print(
                        f"no answer within {timeout_s:.0f} s; the message stays queued "
                        f"({answer.item_id})",
                        markup=False,
                    )
                    raise typer.Exit(1)
        except StreamRefused:
            if not queued:
                return None  # nothing sent yet: the caller sends and polls instead
            raise
    if answer.refused is not None or answer.turn_id is None:
        errors.print(f"not answered: {answer.refused}", markup=False, highlight=False)
        raise typer.Exit(1)
    with _client(settings) as client:
        turn = _call(client, "GET", f"/v1/turns/{answer.turn_id}")
    texts = [
        m["content"].get("text", "")
        for m in turn["messages"]
        if m["role"] == "assistant" and not m["content"].get("partial")
    ]
    answered: str | None = texts[-1] if texts else None
    return queued, {
        "turn_id": answer.turn_id,
        "text": answered,
        "streamed": "".join(answer.printed),
    }
