"""`nexus agents`, `nexus agent …`, `nexus capabilities`: personas and the capabilities they
may carry, asked of the running Nexus (NEXUS_API_URL) like every command that changes the
ledger."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nexus.cli import model_options
from nexus.cli.people import _ShowByDefault
from nexus.cli.remote import api, every_item

console = Console()
errors = Console(stderr=True)
# `--emoji default` (and the like) clears the persona's own value.
CLEAR = model_options.CLEAR

agent_app = typer.Typer(
    cls=_ShowByDefault,
    help="One persona: show it (`nexus agent NAME`), create, edit, archive, capabilities.",
    no_args_is_help=True,
)


def _all_agents(include_archived: bool) -> list[dict[str, Any]]:
    return every_item("/v1/agents", include_archived=include_archived)


def _find(name_or_id: str) -> dict[str, Any]:
    """The persona called NAME_OR_ID, else the one with that id; exit 1 when neither."""
    for agent in _all_agents(include_archived=True):
        if name_or_id in (agent["name"], agent["id"]):
            return agent
    errors.print(f"[red]no persona named {name_or_id!r}[/red] (`nexus agents` lists them)")
    raise typer.Exit(1)


def _model(agent: dict[str, Any]) -> str:
    return model_options.describe(agent.get("model_defaults") or None).removeprefix("model: ")


def _show(agent: dict[str, Any], as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(agent))
        return
    emoji = f"{agent['emoji']} " if agent.get("emoji") else ""
    console.print(
        f"{escape(emoji)}[bold]{escape(agent['name'])}[/bold]  {agent['id']}  ({agent['status']})"
    )
    if agent.get("description"):
        console.print(escape(agent["description"]), highlight=False)
    if agent.get("tags"):
        console.print(f"tags: {escape(', '.join(agent['tags']))}", highlight=False)
    defaults = agent.get("model_defaults") or {}
    shown = _model(agent) if defaults else "(the deployment's default)"
    console.print(f"model defaults: {escape(shown)}", highlight=False)
    console.print(f"capabilities: {', '.join(agent['capabilities']) or '(none)'}")
    if agent.get("permissions"):
        console.print(f"permissions: {json.dumps(agent['permissions'])}", markup=False)
    prompt = agent.get("system_prompt") or ""
    if prompt:
        first = prompt.splitlines()[0]
        console.print(f"prompt: {first[:100]}{'…' if len(prompt) > len(first[:100]) else ''}")


def list_agents(
    archived: bool = typer.Option(False, "--archived", help="Archived personas too."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List personas: emoji, name, tags, model defaults, capabilities, description."""
    agents = _all_agents(include_archived=archived)
    if as_json:
        console.print_json(json.dumps(agents))
        return
    table = Table()
    for column in ("", "name", "tags", "model", "capabilities", "description"):
        table.add_column(column)
    for agent in agents:
        name = agent["name"] + (" (archived)" if agent["status"] == "archived" else "")
        table.add_row(
            escape(agent.get("emoji") or ""),
            escape(name),
            escape(", ".join(agent.get("tags") or [])),
            escape(_model(agent) if agent.get("model_defaults") else ""),
            ", ".join(agent["capabilities"]),
            escape(agent.get("description") or ""),
        )
    console.print(table)


def list_capabilities(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the capabilities a persona may be given, with their icon and category."""
    found = api("GET", "/v1/capabilities")["items"]
    if as_json:
        console.print_json(json.dumps(found))
        return
    table = Table()
    for column in ("", "id", "category", "status", "description"):
        table.add_column(column)
    for capability in found:
        table.add_row(
            capability.get("icon") or "",
            capability["id"],
            capability.get("category") or "",
            capability["status"],
            escape(capability["description"]),
        )
    console.print(table)


def _model_config(
    model: str | None, thinking: str | None, max_tokens: str | None, temperature: str | None
) -> dict[str, Any] | None:
    return model_options.model_config(
        model=model, thinking=thinking, max_tokens=max_tokens, temperature=temperature, clear=CLEAR
    )


_MODEL = typer.Option(None, "--model", help=f"{model_options.MODEL_HELP} (default for sessions).")
_THINKING = typer.Option(None, "--thinking", help=model_options.THINKING_HELP + ".")
_MAX_TOKENS = typer.Option(None, "--max-tokens", help=model_options.MAX_TOKENS_HELP + ".")
_TEMPERATURE = typer.Option(None, "--temperature", help=model_options.TEMPERATURE_HELP + ".")
_JSON = typer.Option(False, "--json", help="Print JSON.")


@agent_app.command("show")
def show(
    name: str = typer.Argument(..., help="The persona's name (or id)."),
    as_json: bool = _JSON,
) -> None:
    """Show one persona."""
    _show(_find(name), as_json)


@agent_app.command("create")
def create(
    name: str = typer.Argument(..., help="The new persona's name."),
    description: str | None = typer.Option(None, "--description", help="A line about it."),
    emoji: str | None = typer.Option(None, "--emoji", help="An emoji shown beside its name."),
    tags: list[str] = typer.Option([], "--tag", help="A tag (repeat for more)."),
    prompt: str | None = typer.Option(None, "--prompt", help="Its system prompt (its soul)."),
    model: str | None = _MODEL,
    thinking: str | None = _THINKING,
    max_tokens: str | None = _MAX_TOKENS,
    temperature: str | None = _TEMPERATURE,
    as_json: bool = _JSON,
) -> None:
    """Create a persona; --model, --thinking, --max-tokens and --temperature are the model
    defaults its sessions inherit."""
    body: dict[str, Any] = {"name": name, "tags": tags}
    for field, value in (("description", description), ("emoji", emoji), ("system_prompt", prompt)):
        if value is not None:
            body[field] = value
    config = model_options.model_config(
        model=model, thinking=thinking, max_tokens=max_tokens, temperature=temperature
    )
    if config is not None:
        body["default_model_config"] = config
    _show(api("POST", "/v1/agents", json=body), as_json)


@agent_app.command("edit")
def edit(
    name: str = typer.Argument(..., help="The persona's name (or id)."),
    rename: str | None = typer.Option(None, "--name", help="A new name."),
    description: str | None = typer.Option(
        None, "--description", help=f"A line about it, or {CLEAR!r}."
    ),
    emoji: str | None = typer.Option(None, "--emoji", help=f"An emoji, or {CLEAR!r}."),
    tags: list[str] | None = typer.Option(
        None, "--tag", help="A tag (repeat for more): the tags given replace its tags."
    ),
    no_tags: bool = typer.Option(False, "--no-tags", help="Remove every tag."),
    prompt: str | None = typer.Option(None, "--prompt", help="Its system prompt."),
    model: str | None = typer.Option(None, "--model", help=f"Default model, or {CLEAR!r}."),
    thinking: str | None = model_options.CLEARABLE_THINKING,
    max_tokens: str | None = model_options.CLEARABLE_MAX_TOKENS,
    temperature: str | None = model_options.CLEARABLE_TEMPERATURE,
    as_json: bool = _JSON,
) -> None:
    """Change a persona's fields (`default` clears one); the model options change its
    model defaults field by field."""
    agent = _find(name)
    body: dict[str, Any] = {}
    if rename is not None:
        body["name"] = rename
    if prompt is not None:
        body["system_prompt"] = prompt
    for field, value in (("description", description), ("emoji", emoji)):
        if value is not None:
            body[field] = None if value == CLEAR else value
    if no_tags:
        body["tags"] = []
    elif tags:
        body["tags"] = tags
    config = _model_config(model, thinking, max_tokens, temperature)
    if config is not None:
        body["default_model_config"] = config
        if model == CLEAR:
            body["default_model"] = None  # the bare name too: the deployment's model applies
    if not body:
        raise typer.BadParameter("give at least one field to change")
    _show(api("PATCH", f"/v1/agents/{quote(agent['id'], safe='')}", json=body), as_json)


@agent_app.command("capabilities")
def capabilities(
    name: str = typer.Argument(..., help="The persona's name (or id)."),
    chosen: list[str] = typer.Argument(None, help="Capability ids, in the order they apply."),
    as_json: bool = _JSON,
) -> None:
    """Replace the persona's capabilities with these (none given: it has none)."""
    agent = _find(name)
    path = f"/v1/agents/{quote(agent['id'], safe='')}/capabilities"
    _show(api("PUT", path, json={"capabilities": chosen or []}), as_json)


@agent_app.command("archive")
def archive(name: str = typer.Argument(..., help="The persona's name (or id).")) -> None:
    """Archive a persona (its sessions and turns keep pointing at it)."""
    agent = _find(name)
    api("DELETE", f"/v1/agents/{quote(agent['id'], safe='')}")
    console.print(f"archived {escape(agent['name'])}")
