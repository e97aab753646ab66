"""`nexus hooks`: the hooks with their breakers, asked of the running Nexus (NEXUS_API_URL).
Registering a directory and dry-running a hook work on this machine's hook files:
`nexus/cli/hooks_local.py`."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from nexus.cli.remote import _call, _client
from nexus.settings import Settings

console = Console()


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
