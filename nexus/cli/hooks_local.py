"""`nexus hooks sync` and `nexus hooks test`: deploy-time tools over this machine's hooks
directory (NEXUS_HOOKS_DIR). They load the hook files where they are, so like `nexus db
upgrade` they reach the ledger themselves; listing hooks goes through the API
(`nexus/cli/hooks.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console

from nexus.bootstrap import bootstrap
from nexus.ledger.records import EventRecord
from nexus.settings import Settings

console = Console()
errors = Console(stderr=True)

# What an event file may leave out: a dry run needs an event, not a stored one.
_EVENT_DEFAULTS: dict[str, Any] = {
    "id": "dry-run:1", "adapter": "webhook", "platform": "webhook", "kind": "message",
    "direction": "inbound", "source": None, "space": None, "sender_id": None,
    "sender_name": None, "contact_id": None, "container_kind": None, "container_id": None,
    "platform_thread_id": None, "text": None, "reply_to": None, "message_id": None,
    "occurred_at": 0, "received_at": 0, "status": "received", "disposition": None,
    "disposition_detail": None,
}  # fmt: skip


def sync_hooks(settings: Settings, *, allow_empty: bool) -> None:
    """Register the hooks of NEXUS_HOOKS_DIR as the deployment's (nexus/hooks/registry.py)."""
    from nexus.hooks.registry import RegistrationRefused, register_directory

    nexus = bootstrap(settings)
    problems: list[str] = []
    runner = nexus.fresh_hook_runner(on_problem=problems.append)
    try:
        registered = register_directory(
            runner, settings.hooks_dir, problems, allow_empty=allow_empty
        )
    except RegistrationRefused as error:
        errors.print(f"[red]nothing changed[/red]: {error}")
        raise typer.Exit(2) from error
    finally:
        nexus.database.dispose()
    console.print(f"registered {len(registered.hooks)} hook(s) from {settings.hooks_dir}")
    for name in registered.hooks:
        console.print(f"  {name}")
    for name in registered.disabled:
        console.print(f"  {name}: disabled (its file is gone)")


def read_event(path: Path) -> EventRecord:
    try:
        given = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        errors.print(f"[red]cannot read {path}[/red]: {error}")
        raise typer.Exit(2) from error
    if not isinstance(given, dict):
        errors.print(f"[red]{path}[/red] must hold one JSON object (an event)")
        raise typer.Exit(2)
    try:
        return EventRecord.model_validate({**_EVENT_DEFAULTS, **given})
    except ValidationError as error:
        errors.print(f"[red]{path} is not an event[/red]: {error}")
        raise typer.Exit(2) from error


def test_hook(settings: Settings, name: str, event_file: Path) -> None:
    """Evaluate NAME on the event and print what it decided; nothing is written."""
    event = read_event(event_file)
    # A dry run writes nothing (so rings nothing) and leaves the hooks table as it is.
    nexus = bootstrap(settings)
    runner = nexus.fresh_hook_runner(
        on_problem=lambda p: errors.print(f"[yellow]not loaded[/yellow]: {p}")
    )
    database = nexus.database
    try:
        invocation, result = runner.dry_run(name, event)
    except KeyError as error:
        errors.print(f"[red]{error.args[0]}[/red]")
        raise typer.Exit(1) from error
    finally:
        database.dispose()
    console.print_json(
        json.dumps(
            {
                "hook": name,
                "fired": invocation.fired,
                "latency_ms": invocation.latency_ms,
                "error": invocation.error,
                "result": result,
                "state_after": invocation.state,
            },
            default=str,
        )
    )
    if invocation.error is not None:
        raise typer.Exit(1)
