"""`nexus configure SESSION …`, `nexus archive SESSION`, `nexus unarchive SESSION`,
`nexus delete SESSION`: a session's own queue and model settings, title and tags, archive
state and deletion, asked of the running Nexus."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import typer
from rich.console import Console

from nexus.cli import model_options
from nexus.cli.remote import api

console = Console()
# `--cap default` (and the like) clears the session's own setting.
CLEAR = model_options.CLEAR


def _patch(label: str, body: dict[str, Any]) -> Any:
    return api("PATCH", f"/v1/sessions/{quote(label, safe='')}", json=body)


def _number(name: str, given: str | None) -> tuple[bool, int | None]:
    if given is None:
        return False, None
    if given == CLEAR:
        return True, None
    try:
        return True, int(given)
    except ValueError as error:
        raise typer.BadParameter(f"{name} is a whole number or {CLEAR!r}") from error


def _show(found: dict[str, Any], as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(found))
        return
    console.print(f"[bold]{found['label']}[/bold]  ({found['status']})")
    if found.get("title"):
        console.print(f"  title: {found['title']}", markup=False, highlight=False)
    if found.get("tags"):
        console.print(f"  tags: {', '.join(found['tags'])}", markup=False, highlight=False)
    for name, setting in found["queue"].items():
        if isinstance(setting, dict):
            value = setting["value"] if setting["value"] is not None else "by message source"
            console.print(f"  {name}: {value}  [dim]({setting['source']})[/dim]")
    if found["queue"].get("policy"):
        console.print(f"  policy: {found['queue']['policy']}")
    for name, setting in (found.get("model_settings") or {}).items():
        value = setting["value"]
        if isinstance(value, dict):  # thinking
            value = value.get("budget_tokens", value.get("type"))
        shown = "off" if value is None and name == "thinking" else value
        console.print(f"  {name}: {shown}  [dim]({setting['source']})[/dim]")
    if found.get("model_settings_error"):
        console.print(f"  [red]model settings refused[/red]: {found['model_settings_error']}")


def configure(
    label: str = typer.Argument(..., help="Session label (aliases are followed)."),
    mode: str | None = typer.Option(None, "--mode", help=f"Queue mode, or {CLEAR!r}."),
    cap: str | None = typer.Option(None, "--cap", help=f"Open items kept, or {CLEAR!r}."),
    drop: str | None = typer.Option(None, "--drop", help=f"old, new, summarize or {CLEAR!r}."),
    debounce_ms: str | None = typer.Option(
        None, "--debounce-ms", help=f"Collect window in ms, or {CLEAR!r}."
    ),
    model: str | None = typer.Option(
        None, "--model", help=f"{model_options.MODEL_HELP}, or {CLEAR!r}."
    ),
    thinking: str | None = model_options.CLEARABLE_THINKING,
    max_tokens: str | None = model_options.CLEARABLE_MAX_TOKENS,
    temperature: str | None = model_options.CLEARABLE_TEMPERATURE,
    title: str | None = typer.Option(None, "--title", help=f"A title, or {CLEAR!r}."),
    tags: list[str] | None = typer.Option(
        None, "--tag", help=f"A tag (repeat for more; they replace the old), or {CLEAR!r}."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Set a session's own queue and model settings, title and tags (`default` clears
    one); with none given, show the effective settings and where each comes from."""
    body: dict[str, Any] = {}
    if title is not None:
        body["title"] = None if title == CLEAR else title
    if tags:
        body["tags"] = None if tags == [CLEAR] else tags
    for name, given in (("queue_mode", mode), ("drop", drop)):
        if given is not None:
            body[name] = None if given == CLEAR else given
    for name, number in (("cap", cap), ("debounce_ms", debounce_ms)):
        sent, value = _number(name, number)
        if sent:
            body[name] = value
    config = model_options.model_config(
        model=model, thinking=thinking, max_tokens=max_tokens, temperature=temperature, clear=CLEAR
    )
    if config is not None:
        body["model_config"] = config
    if not body:
        _show(api("GET", f"/v1/sessions/{quote(label, safe='')}"), as_json)
        return
    _show(_patch(label, body), as_json)


def archive(label: str = typer.Argument(..., help="Session label.")) -> None:
    """Archive a session: it stays readable and forkable, and refuses new messages."""
    found = _patch(label, {"archived": True})
    console.print(f"archived {found['label']}")


def unarchive(label: str = typer.Argument(..., help="Session label.")) -> None:
    """Take a session out of the archive: it takes messages again."""
    found = _patch(label, {"archived": False})
    console.print(f"unarchived {found['label']}")


def delete(label: str = typer.Argument(..., help="Session label.")) -> None:
    """Delete a session: its history stays in the ledger, it takes no more work (waiting
    messages are dropped, a running turn is stopped) and its label is free again."""
    found = api("DELETE", f"/v1/sessions/{quote(label, safe='')}")
    console.print(f"deleted {found['label']}")
