"""`nexus status` and `nexus dead-letters [show ID | replay ID]`: the operator's view of a
running deployment, asked of the API (NEXUS_API_URL), which asks the workers, the ledger
and Redis; the operator needs no database or broker credentials."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from nexus.cli.remote import _segment, api, every_item, stamp

console = Console(emoji=False)
errors = Console(emoji=False, stderr=True)


class _ListByDefault(TyperGroup):
    """`nexus dead-letters` lists them; `nexus dead-letters show ID` and `replay ID` act."""

    def parse_args(self, ctx: Any, args: list[str]) -> Any:
        # (typer carries its own click, whose types it does not export: hence Any.)
        if not args or (args[0].startswith("-") and args[0] != "--help"):
            args = ["list", *args]
        return super().parse_args(ctx, args)


dead_letters_app = typer.Typer(
    cls=_ListByDefault,
    help="Dead-lettered queue items: list them, show one, replay one into its session.",
)


def _age(millis: int | None) -> str:
    if millis is None:
        return "—"
    seconds = millis // 1000
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


@dead_letters_app.command("list")
def list_dead_letters(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Dead-lettered items, the most recently dead first, with why each died."""
    found = every_item("/v1/dead-letters")
    if as_json:
        console.print_json(json.dumps(found))
        return
    if not found:
        console.print("no dead letters")
        return
    table = Table("id", "session", "dead at (UTC)", "attempts", "why", "replayed as")
    for dead in found:
        table.add_row(
            dead["id"], escape(dead["session"]), stamp(dead["dead_at"]), str(dead["attempts"]),
            escape(dead["detail"] or "—"), dead["replayed_as"] or "—",
        )  # fmt: skip
    table.columns[0].no_wrap = True
    console.print(table)


@dead_letters_app.command("show")
def show(
    item_id: str = typer.Argument(..., help="The dead queue item's id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """One dead letter: its session, its text, why it died, its replay."""
    dead = api("GET", f"/v1/dead-letters/{_segment(item_id)}")
    if as_json:
        console.print_json(json.dumps(dead))
        return
    for key in ("id", "session", "event_id", "mode", "attempts", "detail", "text"):
        console.print(f"[bold]{key}[/bold]: {escape(str(dead[key]))}")
    console.print(f"[bold]enqueued at[/bold]: {stamp(dead['enqueued_at'])}")
    console.print(f"[bold]dead at[/bold]: {stamp(dead['dead_at'])}")
    console.print(f"[bold]replayed as[/bold]: {dead['replayed_as'] or 'not replayed'}")


@dead_letters_app.command("replay")
def replay(
    item_id: str = typer.Argument(..., help="The dead queue item's id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Put a dead letter's input back in its session's queue, as a new item (the dead one
    keeps its record); replaying it again says where it went the first time."""
    done = api("POST", f"/v1/dead-letters/{_segment(item_id)}/replay")
    if as_json:
        console.print_json(json.dumps(done))
    elif done["created"]:
        session, new = escape(done["session"]), done["queue_item_id"]
        console.print(f"replayed {item_id} into {session} as {new}")
    else:
        console.print(
            f"{item_id} was replayed already, as {done['queue_item_id']} in "
            f"{escape(done['session'])}"
        )


def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Is Nexus running: workers that answer a ping, the timer's last tick, queue depths,
    dead letters, Redis's eviction policy. Exits 1, saying why, when something is wrong."""
    found = api("GET", "/v1/status")
    if as_json:
        console.print_json(json.dumps(found))
    else:
        _show_status(found)
    if not found["ok"]:
        if not as_json:
            for problem in found["problems"]:
                errors.print(f"[red]problem[/red]: {escape(problem)}")
        raise typer.Exit(1)


def _show_status(found: dict[str, Any]) -> None:
    workers = found["workers"]
    alive = "unknown" if workers is None else (", ".join(workers) or "none")
    console.print(f"[bold]workers[/bold]: {escape(alive)}")
    beat = found["beat"]
    tick = "never" if beat["last_tick_at"] is None else f"{_age(beat['age_ms'])} ago"
    console.print(f"[bold]timer[/bold]: last tick {tick} ({stamp(beat['last_tick_at'])} UTC)")
    queues = found["queues"]
    console.print(
        f"[bold]queues[/bold]: {queues['queued']} queued, {queues['claimed']} claimed in "
        f"{queues['sessions']} session(s); the oldest waiting {_age(queues['oldest_age_ms'])}"
    )
    for depth in queues["deepest"]:
        console.print(
            f"  {escape(depth['session'])}: {depth['queued']} queued, {depth['claimed']} "
            f"claimed, the oldest {_age(depth['oldest_age_ms'])}"
        )
    console.print(
        f"[bold]dead letters[/bold]: {found['dead_letters']} "
        f"({found['dead_letters_unreplayed']} not replayed)"
    )
    policy = found["redis_maxmemory_policy"] or "— (no Redis, or it would not say)"
    console.print(f"[bold]redis maxmemory-policy[/bold]: {escape(policy)}")
    console.print("[green]ok[/green]" if found["ok"] else "[red]not ok[/red]")
