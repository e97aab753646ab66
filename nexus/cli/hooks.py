"""`nexus hooks`: the hooks with their breakers, registering the hooks directory, dry-running
one hook, all asked of the running Nexus (NEXUS_API_URL). Registration and dry runs load the
hook files of the API process's NEXUS_HOOKS_DIR, so this machine needs neither the hooks nor
database credentials."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from nexus.cli.remote import _call, _client, _error_message, _segment, _send
from nexus.settings import Settings

console = Console()
errors = Console(stderr=True)


def list_hooks(settings: Settings, *, as_json: bool) -> None:
    with _client(settings) as client:
        rows = _call(client, "GET", "/v1/hooks")["items"]
    if as_json:
        console.print_json(json.dumps(rows))
        return
    if not rows:
        console.print("no hooks registered yet (`nexus hooks sync` registers a directory)")
        return
    table = Table("name", "mode", "schedule", "enabled", "breaker", "errors", "description")
    for row in rows:
        table.add_row(
            row["name"], row["mode"], row["schedule"] or "—", "yes" if row["enabled"] else "no",
            row["breaker_state"], str(row["consecutive_errors"]), row["description"],
        )  # fmt: skip
    console.print(table)


def sync_hooks(settings: Settings, *, allow_empty: bool) -> None:
    """Ask the API to register the hooks of its NEXUS_HOOKS_DIR as the deployment's; exit 2,
    nothing changed, when it refuses."""
    params = {"allow_empty": "true"} if allow_empty else {}
    with _client(settings) as client:
        response = _send(client, "POST", "/v1/hooks/sync", params=params)
    if response.status_code == 409:
        errors.print(f"[red]nothing changed[/red]: {_error_message(response)}")
        raise typer.Exit(2)
    done = _answer(response)
    console.print(f"registered {len(done['registered'])} hook(s) from the API's hooks directory")
    for name in done["registered"]:
        console.print(f"  {name}")
    for name in done["disabled"]:
        console.print(f"  {name}: disabled (its file is gone)")


def read_event(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; exit 2 when it cannot be read or is not one object."""
    try:
        given = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        errors.print(f"[red]cannot read {path}[/red]: {error}")
        raise typer.Exit(2) from error
    if not isinstance(given, dict):
        errors.print(f"[red]{path}[/red] must hold one JSON object (an event)")
        raise typer.Exit(2)
    return given


def test_hook(settings: Settings, name: str, event_file: Path) -> None:
    """Dry-run hook NAME in the API process on the event in `event_file` and print what it
    decided; nothing is written. Exit 2 when the file is not an event, 1 when the hook
    errored (or there is no such hook)."""
    event = read_event(event_file)
    with _client(settings) as client:
        response = _send(client, "POST", f"/v1/hooks/{_segment(name)}/test", json=event)
    if response.status_code == 422:
        errors.print(f"[red]{event_file} is not an event[/red]: {_error_message(response)}")
        raise typer.Exit(2)
    done = _answer(response)
    console.print_json(json.dumps(done))
    if done["error"] is not None:
        raise typer.Exit(1)


def _answer(response: httpx.Response) -> Any:
    """The body of a successful answer; exit 1 with the API's message otherwise."""
    if response.status_code >= 400:
        errors.print(f"[red]{response.status_code}[/red]: {_error_message(response)}")
        raise typer.Exit(1)
    return response.json()
