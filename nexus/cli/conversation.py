"""CLI commands on the turn tree: show a turn, fork from it, the queue, the tree."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console

from nexus.cli.model_options import describe
from nexus.db import Database
from nexus.pricing import usd
from nexus.settings import Settings

console = Console()
errors = Console(stderr=True)


def _database(settings: Settings) -> Database:
    from nexus.bootstrap import bootstrap

    return bootstrap(settings).database


def turn(settings: Settings, turn_id: str, *, as_json: bool) -> None:
    """Print one turn with its messages and tool calls."""
    database = _database(settings)
    try:
        with database.unit_of_work() as uow:
            view = uow.ledger.threads.get_turn(turn_id)
    finally:
        database.dispose()
    if view is None:
        errors.print(f"[red]no turn[/red] {turn_id!r}")
        raise typer.Exit(1)
    if as_json:
        console.print_json(view.model_dump_json())
        return
    t = view.turn
    console.print(f"[bold]{t.id}[/bold] {t.turn_type} {t.status} parent={t.parent_turn_id}")
    if t.turn_type == "normal":
        console.print(f"  {describe(t.model_settings)}", markup=False, highlight=False)
    if t.total_tokens:
        cost = f"${usd(t.cost_micros)}" if t.cost_micros is not None else "unpriced"
        console.print(f"  {t.total_tokens} tokens, {cost} ({t.model})", markup=False)
    for message in view.messages:
        content = dict(message.content)
        for block in content.pop("thinking", None) or ():
            thought = block.get("thinking") if block.get("type") == "thinking" else "(redacted)"
            console.print(f"  [thinking] {thought}", markup=False, highlight=False)
        shown = json.dumps(content, default=str)
        console.print(f"  [{message.role.value}] {shown}", markup=False, highlight=False)


def fork(settings: Settings, turn_id: str, *, label: str | None, as_json: bool) -> None:
    """A new session whose head is TURN_ID."""
    from nexus.ledger.repository import LedgerError

    database = _database(settings)
    try:
        with database.unit_of_work() as uow:
            session = uow.ledger.sessions.fork(turn_id, label=label)
            uow.commit()
    except LedgerError as error:
        errors.print(f"[red]fork refused[/red]: {error}")
        raise typer.Exit(1) from error
    finally:
        database.dispose()
    if as_json:
        console.print_json(session.model_dump_json())
    else:
        console.print(f"forked [bold]{session.label}[/bold] at {turn_id}")


def queue(settings: Settings, session_label: str, *, cancel: str | None, as_json: bool) -> None:
    """The session's queue items and their dispositions; optionally cancel a waiting one."""
    from rich.table import Table

    from nexus.ledger.enums import Disposition, QueueStatus
    from nexus.queueing.pending import places

    database = _database(settings)
    try:
        with database.unit_of_work() as uow:
            session = uow.ledger.sessions.resolve(session_label)
            if session is None:
                errors.print(f"[red]no session[/red] {session_label!r}")
                raise typer.Exit(1)
            if cancel is not None:
                changed = uow.ledger.queue.dispose(
                    [cancel],
                    status=QueueStatus.DROPPED,
                    disposition=Disposition.CANCELLED,
                    detail="cancelled from the CLI",
                    only_waiting=True,
                )
                if not changed:
                    errors.print(f"[red]cannot cancel[/red] {cancel}: not a waiting item here")
                    raise typer.Exit(1)
                uow.commit()
            items = uow.ledger.queue.for_session(session.id)
            found = places(items, now_ms=uow.ledger.clock())
    finally:
        database.dispose()
    if as_json:
        rows = [
            item.model_dump(mode="json")
            | (
                {"position": found[item.id].position, "age_ms": found[item.id].age_ms}
                if item.id in found
                else {}
            )
            for item in items
        ]
        console.print_json(json.dumps(rows))
        return
    table = Table("#", "id", "mode", "status", "waited", "disposition", "attempts", "detail")
    for item in items:
        place = found.get(item.id)
        table.add_row(
            str(place.position) if place else "",
            item.id,
            item.mode.value,
            item.status.value,
            f"{place.age_ms / 1000:.1f} s" if place else "",
            item.disposition.value if item.disposition else "",
            str(item.attempts),
            item.disposition_detail or "",
        )
    console.print(table)


def tree(settings: Settings, session_label: str, *, as_json: bool) -> None:
    """The session's turn tree: compactions, workers and forks marked."""
    from nexus.agents.tree import session_tree
    from nexus.ledger.repository import NotFound

    database = _database(settings)
    try:
        with database.unit_of_work() as uow:
            found = session_tree(uow.ledger, session_label)
    except NotFound as error:
        errors.print(f"[red]{error}[/red]")
        raise typer.Exit(1) from error
    finally:
        database.dispose()
    found["running"] = _running(settings, session_label)
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
            task = f"  ({branch['task']})" if branch["task"] else ""
            console.print(f"│   └─ {branch['kind']} [bold]{branch['session']}[/bold]{task}")
    running = found["running"]
    if running is not None:
        shown = f"running  {running['step']} on {running['worker']} (turn {running['turn_id']})"
        console.print(f"└┄ {shown}", markup=False, highlight=False)


def _running(settings: Settings, session_label: str) -> dict[str, Any] | None:
    """The turn the session runs now, as the running Nexus (NEXUS_API_URL) knows it; None
    when it runs none or no Nexus answers (the ledger alone knows only committed turns)."""
    import httpx

    from nexus.cli.remote import _client, _segment

    try:
        with _client(settings) as client:
            response = client.get(f"/v1/sessions/{_segment(session_label)}/tree", timeout=2.0)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    running: dict[str, Any] | None = response.json().get("running")
    return running
