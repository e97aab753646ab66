"""CLI commands on the turn tree: show a turn, fork from it, the queue, the tree. Asked of
the running Nexus (NEXUS_API_URL) like every operator command: no database credentials."""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from nexus.cli.model_options import describe
from nexus.cli.remote import _answered, _call, _client, _segment, _send
from nexus.pricing import usd
from nexus.settings import Settings

console = Console()
errors = Console(stderr=True)


def _api(settings: Settings, method: str, path: str, **kwargs: Any) -> Any:
    with _client(settings) as client:
        return _call(client, method, path, **kwargs)


def turn(settings: Settings, turn_id: str, *, as_json: bool) -> None:
    """Print one turn with its messages and tool calls."""
    view = _api(settings, "GET", f"/v1/turns/{_segment(turn_id)}")
    if as_json:
        console.print_json(json.dumps(view))
        return
    t = view["turn"]
    console.print(
        f"[bold]{t['id']}[/bold] {t['turn_type']} {t['status']} parent={t['parent_turn_id']}"
    )
    if t["turn_type"] == "normal":
        console.print(f"  {describe(t.get('model_settings'))}", markup=False, highlight=False)
    if t.get("total_tokens"):
        micros = t.get("cost_micros")
        cost = f"${usd(micros)}" if micros is not None else "unpriced"
        console.print(f"  {t['total_tokens']} tokens, {cost} ({t['model']})", markup=False)
    for message in view["messages"]:
        content = dict(message["content"])
        for block in content.pop("thinking", None) or ():
            thought = block.get("thinking") if block.get("type") == "thinking" else "(redacted)"
            console.print(f"  [thinking] {thought}", markup=False, highlight=False)
        shown = json.dumps(content, default=str)
        console.print(f"  [{message['role']}] {shown}", markup=False, highlight=False)


def fork(settings: Settings, turn_id: str, *, label: str | None, as_json: bool) -> None:
    """A new session whose head is TURN_ID."""
    body = {"label": label} if label is not None else {}
    session = _api(settings, "POST", f"/v1/turns/{_segment(turn_id)}/fork", json=body)
    if as_json:
        console.print_json(json.dumps(session))
    else:
        console.print(f"forked [bold]{session['label']}[/bold] at {turn_id}")


def queue(settings: Settings, session_label: str, *, cancel: str | None, as_json: bool) -> None:
    """The session's queue items and their dispositions; optionally cancel a waiting one
    (the API's cancel: only an item of this session, announced on its stream)."""
    path = f"/v1/sessions/{_segment(session_label)}/queue"
    with _client(settings) as client:
        if cancel is not None:
            _call(client, "DELETE", f"{path}/{_segment(cancel)}")
        items = _call(client, "GET", path)["items"]
    if as_json:
        console.print_json(json.dumps(items))
        return
    table = Table("#", "id", "mode", "status", "waited", "disposition", "attempts", "detail")
    for item in items:
        age = item.get("age_ms")
        table.add_row(
            str(item["position"]) if item.get("position") is not None else "",
            item["id"],
            item["mode"],
            item["status"],
            f"{age / 1000:.1f} s" if age is not None else "",
            item["disposition"] or "",
            str(item["attempts"]),
            item["detail"] or "",
        )
    console.print(table)


def tree(settings: Settings, session_label: str, *, as_json: bool) -> None:
    """The session's turn tree: compactions, workers and forks marked, and the turn on its
    way when one runs."""
    found = _api(settings, "GET", f"/v1/sessions/{_segment(session_label)}/tree")
    if as_json:
        console.print_json(json.dumps(found))
        return
    parent = f"  (worker of {found['parent']})" if found["parent"] else ""
    console.print(f"[bold]{found['session']}[/bold]{parent}")
    for turn in found["turns"]:
        if turn["type"] == "compaction":
            shown = f"◆ compaction  {turn['summary'] or ''}"
        else:
            shown = f"{turn['status']}  {turn['query'] or ''} → {turn['answer'] or ''}"
        console.print(f"├─ {turn['id']}  {shown}", markup=False, highlight=False)
        if turn.get("thinking"):
            console.print(f"│   thinking: {turn['thinking']}", markup=False, highlight=False)
        for branch in turn["branches"]:
            if branch["kind"] == "abandoned":
                console.print(f"│   └─ abandoned: head was {branch['head']} (rolled back here)")
                continue
            task = f"  ({branch['task']})" if branch["task"] else ""
            console.print(f"│   └─ {branch['kind']} [bold]{branch['session']}[/bold]{task}")
    running = found.get("running")
    if running is not None:
        shown = f"running  {running['step']} on {running['worker']} (turn {running['turn_id']})"
        console.print(f"└┄ {shown}", markup=False, highlight=False)


def rollback(
    settings: Settings,
    session_label: str,
    turn_id: str,
    *,
    abort: bool,
    timeout_s: float,
    as_json: bool,
) -> None:
    """Roll the session back to `turn_id`. With `abort`, a running turn is asked to stop
    and the rollback asked again until it went through or `timeout_s` passed."""
    path = f"/v1/sessions/{_segment(session_label)}/rollback"
    body = {"turn_id": turn_id, "abort": abort}
    deadline = time.monotonic() + timeout_s
    with _client(settings) as client:
        while True:
            response = _send(client, "POST", path, json=body)
            running = response.status_code == 409 and _kind(response) == "turn_running"
            if not (abort and running and time.monotonic() < deadline):
                break
            time.sleep(_RETRY_S)  # the running turn stops at its next chunk or boundary
        done = _answered(response)
    if as_json:
        console.print_json(json.dumps(done))
    elif done["moved"]:
        console.print(f"{done['session']}: head {done['previous_head']} → {done['head']}")
    else:
        console.print(f"{done['session']}: {done['head']} is the head already")


_RETRY_S = 0.5


def _kind(response: Any) -> str | None:
    try:
        found = response.json()
    except ValueError:
        return None
    error = found.get("error") if isinstance(found, dict) else None
    return error.get("type") if isinstance(error, dict) else None
