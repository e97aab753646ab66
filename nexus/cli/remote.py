"""CLI commands that talk to a running Nexus over its HTTP API (send, compact, merge, …).

They go through the API rather than the database so that the worker behind it hears the
doorbell at once, whichever mode it runs in (the embedded `memory://` broker lives inside
the `nexus dev` process and cannot be reached from another one).
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nexus.settings import Settings, get_settings

console = Console()
errors = Console(stderr=True)
POLL_SECONDS = 0.2
PAGE = 200  # items asked for at a time when listing


def _segment(label: str) -> str:
    """A label as one URL path segment: `?`, `#`, `%` and `/` in it stay part of the label
    (unquoted, `what?` would have addressed the session `what`)."""
    return quote(label, safe="")


def _client(settings: Settings) -> httpx.Client:
    headers = {}
    if settings.api_token is not None:
        headers["Authorization"] = f"Bearer {settings.api_token.get_secret_value()}"
    return httpx.Client(base_url=settings.api_url.rstrip("/"), headers=headers, timeout=30.0)


def _send(client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """The API's answer, whatever its status; exit 1 when Nexus cannot be reached."""
    try:
        return client.request(method, path, **kwargs)
    except httpx.HTTPError as error:
        errors.print(
            f"[red]cannot reach Nexus at {client.base_url}[/red]: {error}\n"
            "Start it with `nexus dev` (or `nexus api`), or set NEXUS_API_URL."
        )
        raise typer.Exit(1) from error


def _error_message(response: httpx.Response) -> str:
    """The message of an error answer (its text when it is not in the API's error shape)."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text


def _call(client: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    return _answered(_send(client, method, path, **kwargs))


def api(method: str, path: str, **kwargs: Any) -> Any:
    """One call to the running Nexus (NEXUS_API_URL) and its JSON answer; exit 1 on an error."""
    with _client(get_settings()) as client:
        return _call(client, method, path, **kwargs)


def every_item(path: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a paged listing, its pages followed to the end by `next_cursor`."""
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query: dict[str, Any] = {"limit": PAGE, **params}
        if cursor is not None:
            query["cursor"] = cursor
        page = api("GET", path, params=query)
        found.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def stamp(millis: int | None) -> str:
    """A ledger time (Unix ms) as a UTC date and time to the second; a dash for none."""
    if millis is None:
        return "—"
    return datetime.fromtimestamp(millis / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _answered(response: httpx.Response) -> Any:
    """The answer's JSON; exit 1, saying why, for an error."""
    if response.status_code >= 400:
        errors.print(f"[red]{response.status_code}[/red]: {_error_message(response)}")
        raise typer.Exit(1)
    return response.json()


def send(
    settings: Settings,
    label: str,
    text: str,
    *,
    persona: str | None,
    mode: str | None,
    wait: bool,
    timeout_s: float,
    as_json: bool,
    model_config: dict[str, Any] | None = None,
) -> None:
    body: dict[str, Any] = {"content": text}
    if model_config:
        body["model_config"] = model_config
    if persona:
        body["persona"] = persona
    if mode:
        body["mode"] = mode
    if wait:
        from nexus.cli.live import send_and_stream

        streamed = send_and_stream(
            settings, label, body, timeout_s=timeout_s, show=None if as_json else _show_delta
        )
        if streamed is not None:
            _, answer = streamed
            if as_json:
                _print({"turn_id": answer["turn_id"], "text": answer["text"]}, True, "")
            elif answer["streamed"]:
                console.file.write("\n")  # the deltas were the answer, as it was written
                console.file.flush()
            else:  # the model wrote it in one piece (or no text at all)
                _print(answer, False, answer.get("text") or f"(turn {answer['turn_id']}: no text)")
            return
    with _client(settings) as client:
        queued = _call(client, "POST", f"/v1/sessions/{_segment(label)}/messages", json=body)
        if not wait:
            _print(queued, as_json, f"queued as {queued['queue_item_id']}")
            return
        answer = _wait_for_answer(client, label, queued["queue_item_id"], timeout_s)
    _print(answer, as_json, answer.get("text") or f"(turn {answer['turn_id']}: no text)")


def _show_delta(text: str) -> None:
    console.file.write(text)
    console.file.flush()


def _wait_for_answer(
    client: httpx.Client, label: str, item_id: str, timeout_s: float
) -> dict[str, Any]:
    """Poll the queue until the item has a disposition, then read the turn that took it
    (when the session's stream cannot be had)."""
    deadline = time.monotonic() + timeout_s
    # A spinner on a terminal; nothing on a pipe, where it would only be noise.
    status = console.status("waiting for the answer…") if console.is_terminal else nullcontext()
    with status:
        while time.monotonic() < deadline:
            queue = _call(client, "GET", f"/v1/sessions/{_segment(label)}/queue")
            item = next((i for i in queue["items"] if i["id"] == item_id), None)
            if item is not None and item["disposition"] is not None:
                turn_id = item["consumed_by_turn_id"]
                if turn_id is None:
                    errors.print(f"not answered: {item['disposition']} ({item['detail']})")
                    raise typer.Exit(1)
                turn = _call(client, "GET", f"/v1/turns/{turn_id}")
                texts = [
                    m["content"].get("text", "")
                    for m in turn["messages"]
                    if m["role"] == "assistant" and not m["content"].get("partial")
                ]
                return {"turn_id": turn_id, "text": texts[-1] if texts else None}
            time.sleep(POLL_SECONDS)
    errors.print(f"no answer within {timeout_s:.0f} s; the message stays queued ({item_id})")
    raise typer.Exit(1)


def compact(settings: Settings, label: str, instructions: str | None, *, timeout_s: float) -> None:
    """Queue a compaction through the API and wait for the session's runner to do it."""
    body = {"instructions": instructions} if instructions else {}
    with _client(settings) as client:
        queued = _call(client, "POST", f"/v1/sessions/{_segment(label)}/compact", json=body)
        item = _wait_for_disposition(client, label, queued["queue_item_id"], timeout_s)
    turn_id = item["consumed_by_turn_id"]
    if turn_id is not None:
        console.print(f"compacted into {turn_id}")
    elif item["disposition"] == "consumed":
        console.print(item["detail"] or "nothing to compact")
    else:
        errors.print(f"not compacted: {item['disposition']} ({item['detail']})")
        raise typer.Exit(1)


def _wait_for_disposition(
    client: httpx.Client, label: str, item_id: str, timeout_s: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queue = _call(client, "GET", f"/v1/sessions/{_segment(label)}/queue")
        item = next((i for i in queue["items"] if i["id"] == item_id), None)
        if item is not None and item["disposition"] is not None:
            return dict(item)
        time.sleep(POLL_SECONDS)
    errors.print(f"not done within {timeout_s:.0f} s; the compaction stays queued ({item_id})")
    raise typer.Exit(1)


def merge(settings: Settings, *, into: str, merged: list[str]) -> None:
    """Merge through the API: the server's doorbell rings the primary session for the
    merge notice at once (a doorbell rung from this process would not reach `nexus dev`'s
    in-process broker, and the notice would wait for the relay's next tick)."""
    with _client(settings) as client:
        result = _call(client, "POST", "/v1/entities/merge", json={"into": into, "merge": merged})
    console.print(f"merged into [bold]{result['root']}[/bold]")
    if result["primary_session"]:
        console.print(f"primary session: {result['primary_session']}")
    for alias in result["aliases_created"]:
        console.print(f"  alias {alias} -> {result['primary_session']}")


def sessions(settings: Settings, *, persona: str | None, as_json: bool) -> None:
    params = {"persona": persona} if persona else {}
    with _client(settings) as client:
        found = _call(client, "GET", "/v1/sessions", params=params)
    if as_json:
        console.print_json(json.dumps(found))
        return
    table = Table("label", "title", "tags", "persona", "head", "origin", "status", "queue mode")
    for item in found["items"]:
        table.add_row(
            item["label"], escape(item.get("title") or ""), ", ".join(item.get("tags") or []),
            item["persona"], item["thread_id"] or "—", item["origin"], item["status"],
            item["queue_mode"] or "default",
        )  # fmt: skip
    console.print(table)


def session(settings: Settings, label: str, *, as_json: bool) -> None:
    with _client(settings) as client:
        found = _call(client, "GET", f"/v1/sessions/{_segment(label)}")
    if as_json:
        console.print_json(json.dumps(found))
        return
    running, waiting = found.pop("running", None), found.pop("pending", None)
    effective = found.pop("queue", None)
    for key, value in found.items():
        console.print(f"[bold]{key}[/bold]: {value}")
    if effective is not None:
        for name, setting in effective.items():
            if isinstance(setting, dict):
                value = setting["value"] if setting["value"] is not None else "by message source"
                console.print(f"[bold]queue {name}[/bold]: {value} ({setting['source']})")
    if running is not None:
        console.print(
            f"[bold]running[/bold]: turn {running['turn_id']} on {running['worker']}, "
            f"{running['step']}, since {running['started_at']}"
        )
    else:
        console.print("[bold]running[/bold]: nothing")
    if waiting is not None:
        oldest = waiting["oldest_age_ms"]
        age = f", the oldest for {oldest / 1000:.1f} s" if oldest is not None else ""
        console.print(f"[bold]pending[/bold]: {waiting['count']} item(s){age}")


def _print(value: dict[str, Any], as_json: bool, text: str) -> None:
    if as_json:
        console.print_json(json.dumps(value))
    else:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
