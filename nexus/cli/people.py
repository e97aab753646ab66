"""`nexus entities`, `nexus entity …`, `nexus aliases`, `nexus alias …`: people and aliases,
asked of the running Nexus (NEXUS_API_URL) like every command that changes the ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from nexus.cli.remote import api

console = Console()


class _ShowByDefault(TyperGroup):
    """`nexus entity ID` shows an entity; `nexus entity create …` and the others act."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # (typer carries its own click, whose types it does not export: hence Any.)
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["show", *args]
        return super().resolve_command(ctx, args)


entity_app = typer.Typer(
    cls=_ShowByDefault,
    help="One entity: show it (`nexus entity ID`), create, rename, owner or known, contacts.",
    no_args_is_help=True,
)
alias_app = typer.Typer(help="Session aliases: add and remove (merges write them too).")


_ENTITY_ID = typer.Argument(..., help="The entity's id.")


def _entity(entity_id: str) -> str:
    """The API path of one entity."""
    return f"/v1/entities/{quote(entity_id, safe='')}"


def _contact(address: str) -> dict[str, str]:
    platform, _, sender = address.partition(":")
    if not platform or not sender:
        raise typer.BadParameter(f"{address!r} is not PLATFORM:SENDER (say, sms:+15551234567)")
    return {"platform": platform, "sender_id": sender}


def _show(entity: dict[str, Any], as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(entity))
        return
    console.print(f"[bold]{entity['id']}[/bold]  {entity['name']}  ({entity['principal']})")
    if entity.get("merged_into"):
        console.print(f"merged into: {entity['merged_into']}")
    if entity.get("merged"):
        console.print(f"merged from: {', '.join(entity['merged'])}")
    for contact in entity.get("contacts", []):
        name = f"  ({contact['display_name']})" if contact["display_name"] else ""
        console.print(f"  contact {contact['platform']}:{contact['sender_id']}{name}")
    for label in entity.get("sessions", []):
        console.print(f"  session {label}")
    if "last_seen_at" in entity:
        console.print(f"last seen: {_when(entity['last_seen_at'])}")


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def list_entities(
    merged: bool = typer.Option(False, "--merged", help="Include merged-away entities."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List person entities (their contacts: `nexus entity ID`)."""
    found = api("GET", "/v1/entities", params={"merged": str(merged).lower(), "limit": 200})
    if as_json:
        console.print_json(json.dumps(found))
        return
    table = Table("id", "name", "principal", "kind", "merged into")
    for entity in found["items"]:
        table.add_row(
            entity["id"], entity["name"], entity["principal"], entity["kind"],
            entity["merged_into"] or "—",
        )  # fmt: skip
    console.print(table)


@entity_app.command("show")
def show(
    entity_id: str = _ENTITY_ID,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show an entity: its contacts, sessions and last activity."""
    _show(api("GET", _entity(entity_id)), as_json)


@entity_app.command("create")
def create(
    name: str = typer.Argument(..., help="The person's name."),
    owner: bool = typer.Option(False, "--owner/--known", help="The owner, or a known person."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Create a person entity (attach contacts to it, or merge first-contact ones into it)."""
    body = {"name": name, "principal": "owner" if owner else "known"}
    _show(api("POST", "/v1/entities", json=body), as_json)


@entity_app.command("rename")
def rename(
    entity_id: str = _ENTITY_ID,
    name: str = typer.Argument(..., help="The new name."),
) -> None:
    """Rename an entity."""
    _show(api("PATCH", _entity(entity_id), json={"name": name}), False)


@entity_app.command("principal")
def principal(
    entity_id: str = _ENTITY_ID,
    kind: str = typer.Argument(..., help="owner or known."),
) -> None:
    """Make an entity the owner, or a known person again (from its next message on)."""
    _show(api("PATCH", _entity(entity_id), json={"principal": kind}), False)


@entity_app.command("attach")
def attach(
    entity_id: str = _ENTITY_ID,
    address: str = typer.Argument(..., help="PLATFORM:SENDER, e.g. sms:+15551234567."),
) -> None:
    """Make a platform address this entity's; its next message routes as this person's."""
    found = api("POST", f"{_entity(entity_id)}/contacts", json=_contact(address))
    moved = found["previous_entity_id"]
    console.print(f"{address} -> {entity_id}" + (f" (was {moved})" if moved else ""))


@entity_app.command("detach")
def detach(
    entity_id: str = _ENTITY_ID,
    address: str = typer.Argument(..., help="PLATFORM:SENDER."),
) -> None:
    """Take a platform address from this entity; it goes back to an entity of its own."""
    found = api("DELETE", f"{_entity(entity_id)}/contacts", params=_contact(address))
    console.print(f"{address} -> {found['entity_id']}")


def list_aliases(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List session aliases: what each leads to, and why it was written."""
    found = api("GET", "/v1/aliases", params={"limit": 200})
    if as_json:
        console.print_json(json.dumps(found))
        return
    table = Table("alias", "session", "leads to", "reason")
    for alias in found["items"]:
        table.add_row(
            alias["alias"], alias["session"], alias["resolves_to"] or "—", alias["reason"] or "—"
        )
    console.print(table)


@alias_app.command("add")
def add(
    alias: str = typer.Argument(..., help="The new key (a session label that will lead on)."),
    session: str = typer.Argument(..., help="The session it leads to."),
) -> None:
    """What is addressed to ALIAS goes to SESSION from now on (circles are refused)."""
    found = api("POST", "/v1/aliases", json={"alias": alias, "session": session})
    console.print(f"alias {found['alias']} -> {found['session']}")


@alias_app.command("remove")
def remove(alias: str = typer.Argument(..., help="The alias to remove.")) -> None:
    """Remove an alias: what is addressed to it goes to its own session again."""
    found = api("DELETE", f"/v1/aliases/{quote(alias, safe='')}")
    console.print(f"removed alias {found['alias']} (it led to {found['session']})")
