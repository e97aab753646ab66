"""`nexus usage [--session S] [--persona P] [--since DATE]`: tokens and cost in total, per
UTC day and per model. Asked of the running Nexus (NEXUS_API_URL)."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nexus.settings import get_settings

console = Console(emoji=False)
_COLUMNS = ("turns", "input", "output", "cache read", "cache write", "USD", "unpriced")


def _api(params: dict[str, str]) -> Any:
    from nexus.cli.remote import _call, _client

    with _client(get_settings()) as client:
        return _call(client, "GET", "/v1/usage", params=params)


def _cells(usage: dict[str, Any]) -> list[str]:
    """Counts, then the cost (— when none of it has a price) and the unpriced turns, which
    the cost leaves out."""
    tokens = usage["tokens"]
    return [
        str(usage["turns"]),
        *(f"{tokens[kind]:,}" for kind in ("input", "output", "cache_read", "cache_write")),
        usage["cost_usd"] or "—",
        str(usage["unpriced_turns"]) if usage["unpriced_turns"] else "",
    ]


def _table(title: str, heading: str, rows: list[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(heading, *_COLUMNS, title=title)
    for name, usage in rows:
        table.add_row(escape(name), *_cells(usage))
    for column in table.columns[1:]:
        column.justify = "right"
    # Days, model names and amounts stay whole; headers wrap first on a narrow terminal.
    first, amount = table.columns[0], table.columns[-2]
    first.no_wrap = amount.no_wrap = True
    first.min_width = max((len(name) for name, _ in rows), default=0)
    amount.min_width = len("0.000000")
    return table


def usage(
    session: str | None = typer.Option(None, "--session", help="Only this session (a label)."),
    persona: str | None = typer.Option(None, "--persona", help="Only this persona (a name)."),
    since: str | None = typer.Option(
        None, "--since", metavar="DATE", help="From this UTC date (YYYY-MM-DD) or ISO time on."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Tokens (input, output, cache read and write) and cost, in total, per UTC day and
    per model; a model with no price shows as unpriced, never as free."""
    params = {
        name: value
        for name, value in (("session", session), ("persona", persona), ("since", since))
        if value is not None
    }
    report = _api(params)
    if as_json:
        console.print_json(json.dumps(report))
        return
    if not report["days"]:
        console.print("no model usage" + (" since " + escape(since) if since else ""))
        return
    console.print(_table("per day (UTC)", "day", [(d["day"], d) for d in report["days"]]))
    models = [(m["model"] or "—", m) for m in report["models"]]
    console.print(_table("per model", "model", models))
    console.print(_table("total", "", [("total", report["totals"])]))
    unpriced = report["totals"]["unpriced_models"]
    if unpriced:
        console.print(
            f"[yellow]{report['totals']['unpriced_turns']} turn(s) unpriced[/yellow] "
            f"(models with no price: {escape(', '.join(m or '—' for m in unpriced))}; "
            "NEXUS_PRICES can price them from now on)"
        )
