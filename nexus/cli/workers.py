"""`nexus workers SESSION`: a manager's workers and where their tasks stand; `--cancel
WORKER` cancels one. Asked of the running Nexus (NEXUS_API_URL)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nexus.cli.remote import api, every_item, stamp

# Labels and task text are the users' own: no emoji codes (worker:b: is no 🅱) or markup.
console = Console(emoji=False)
errors = Console(emoji=False, stderr=True)


def _all_workers(session: str) -> list[dict[str, Any]]:
    return every_item(f"/v1/sessions/{quote(session, safe='')}/workers")


def workers(
    session: str = typer.Argument(..., help="The manager session."),
    cancel: str | None = typer.Option(
        None, "--cancel", metavar="WORKER", help="Cancel this worker session instead."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the workers SESSION dispatched and the tasks it sent to other sessions or forks,
    with each task's status (pending, running, completed, failed, cancelled); `--cancel
    WORKER` cancels one of its workers."""
    if cancel is not None:
        _cancel(session, cancel, as_json)
        return
    found = _all_workers(session)
    if as_json:
        console.print_json(json.dumps(found))
        return
    if not found:
        console.print(f"{escape(session)} has dispatched no workers")
        return
    table = Table("worker", "task status", "turns", "last turn", "task")
    for worker in found:
        kind = worker.get("kind", "worker")
        # A tracked task went to a session that is no worker of this one: say which kind.
        named = worker["label"] if kind == "worker" else f"{worker['label']} ({kind} task)"
        table.add_row(
            escape(named),
            worker["task_status"] or "—",
            str(worker["turns"]),
            stamp(worker["last_turn_at"]),
            escape(worker["task_description"] or "—"),
        )
    table.columns[0].no_wrap = True
    console.print(table)


def _cancel(session: str, worker: str, as_json: bool) -> None:
    """Cancel WORKER, refusing one that is not SESSION's own (a typo should not stop
    someone else's work)."""
    spawned = _all_workers(session)
    if worker not in {f["label"] for f in spawned if f.get("kind", "worker") == "worker"}:
        errors.print(f"[red]{escape(worker)} is not a worker of {escape(session)}[/red]")
        raise typer.Exit(1)
    done = api("POST", f"/v1/sessions/{quote(worker, safe='')}/cancel")
    if as_json:
        console.print_json(json.dumps(done))
        return
    if done["already_cancelled"]:
        console.print(f"{escape(worker)} was cancelled already")
        return
    dropped = len(done["cancelled_items"])
    console.print(
        f"cancelled {escape(worker)}: {dropped} waiting item(s) dropped; a turn it was "
        "running, if any, is asked to stop"
    )
