"""The `nexus` command: entry point and sub-command wiring."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from nexus import __version__
from nexus.cli import agents, operator, people, session_cmds, settings_cmds, usage
from nexus.cli import workers as worker_cmds
from nexus.cli.configuration import errors, settings_or_exit

app = typer.Typer(
    name="nexus",
    help="Nexus: a durable, horizontally scalable agent broker.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
db_app = typer.Typer(help="Database schema: migrations.", no_args_is_help=True)
app.add_typer(db_app, name="db")
hooks_app = typer.Typer(help="Hooks: list them, register a directory, dry-run one.")
app.add_typer(hooks_app, name="hooks")

console = Console()


def installed_version() -> str:
    """The version of the installed package (its metadata), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nexus-broker")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return __version__


def _print_version(given: bool) -> None:
    if given:
        console.print(installed_version(), markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    show_version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Nexus: a durable, horizontally scalable agent broker."""


@app.command()
def version() -> None:
    """Print the Nexus version."""
    console.print(installed_version(), markup=False, highlight=False)


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Apply database migrations up to REVISION (default: the latest)."""
    from nexus.cli.database import upgrade

    upgrade(settings_or_exit(), revision)


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Check the database, migrations, Redis, broker, model and sandbox; say what to fix."""
    from nexus.doctor import run_checks

    checks = run_checks(settings_or_exit())
    if as_json:
        typer.echo(json.dumps([asdict(check) for check in checks], indent=2))
    else:
        table = Table(title="nexus doctor")
        for column in ("check", "status", "detail", "fix"):
            table.add_column(column)
        colour = {"ok": "green", "warn": "yellow", "fail": "red"}
        for check in checks:
            table.add_row(
                check.name,
                f"[{colour[check.status]}]{check.status}[/]",
                # Text, not markup: a fix such as `pip install 'nexus-broker[psycopg2]'`
                # has brackets rich would take for a style.
                escape(check.detail),
                escape(check.fix or ""),
            )
        console.print(table)
    if any(check.status == "fail" for check in checks):
        raise typer.Exit(1)


@app.command()
def api(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(1, help="Worker processes."),
) -> None:
    """Serve the HTTP API (webhooks, REST) with uvicorn."""
    import uvicorn

    from nexus.logs import configure_logging

    configure_logging(settings_or_exit())  # refuses a bad configuration first, with the reason
    # log_config=None: uvicorn's records (access lines included) go through Nexus's
    # processors like every other record, instead of uvicorn's own handlers.
    uvicorn.run(
        "nexus.api.main:build", factory=True, host=host, port=port, workers=workers,
        proxy_headers=True, log_level="info", log_config=None,
    )  # fmt: skip


_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command(context_settings=_PASS_THROUGH)
def worker(
    context: typer.Context,
    queues: str = typer.Option(
        "events,sessions,delivery,hooks,timer", "--queues", "-Q", help="Queues to consume."
    ),
) -> None:
    """Run a Celery worker (any number, on any host); extra arguments go to Celery."""
    from nexus.cli.processes import worker as run_worker

    run_worker(settings_or_exit(), queues, list(context.args))


@app.command(context_settings=_PASS_THROUGH)
def beat(context: typer.Context) -> None:
    """Run the scheduler that rings the 60-second timer (one per deployment)."""
    from nexus.cli.processes import beat as run_beat

    settings_or_exit()
    run_beat(list(context.args))


@app.command(context_settings=_PASS_THROUGH)
def flower(
    context: typer.Context,
    address: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(5555, help="Port to listen on."),
) -> None:
    """Run Flower, the Celery monitor (basic auth from NEXUS_FLOWER_BASIC_AUTH)."""
    from nexus.cli.processes import flower as run_flower

    run_flower(settings_or_exit(), address, port, list(context.args))


@app.command()
def merge(
    entities: list[str] = typer.Argument(..., help="Entities that are the same person."),
    into: str = typer.Option(..., "--into", help="The entity they merge into."),
) -> None:
    """Merge entities into one person; their DM sessions get aliases to one primary.

    Asked of the running Nexus (NEXUS_API_URL), whose worker hears of the merge at once."""
    from nexus.cli.remote import merge as merge_remote

    merge_remote(settings_or_exit(), into=into, merged=entities)


def _mount(entries: Sequence[tuple[str, Callable[..., Any] | typer.Typer]]) -> None:
    """Add each command (a function) or command group (a Typer) under its name, in order:
    the order is the help's."""
    for name, target in entries:
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name)
        else:
            app.command(name)(target)


_mount(
    (
        # People and aliases (nexus/cli/people.py): `entities`, `entity …`, `aliases`, `alias …`.
        ("entities", people.list_entities),
        ("entity", people.entity_app),
        ("aliases", people.list_aliases),
        ("alias", people.alias_app),
        # Personas and capabilities (nexus/cli/agents.py): `agents`, `agent …`, `capabilities`.
        ("agents", agents.list_agents),
        ("agent", agents.agent_app),
        ("capabilities", agents.list_capabilities),
        # A session's own settings (nexus/cli/settings_cmds.py).
        ("configure", settings_cmds.configure),
        ("archive", settings_cmds.archive),
        ("unarchive", settings_cmds.unarchive),
        ("delete", settings_cmds.delete),
        # A manager's workers (nexus/cli/workers.py): `workers SESSION [--cancel WORKER]`.
        ("workers", worker_cmds.workers),
        # Tokens and cost (nexus/cli/usage.py): `usage [--session S] [--persona P] [--since DATE]`.
        ("usage", usage.usage),
        # The operator's view (nexus/cli/operator.py): `status`, `dead-letters [show|replay ID]`.
        ("status", operator.status),
        ("dead-letters", operator.dead_letters_app),
        # One session, its turns and its queue (nexus/cli/session_cmds.py).
        ("tail", session_cmds.tail_command),
        ("turn", session_cmds.turn_command),
        ("fork", session_cmds.fork_command),
        ("rollback", session_cmds.rollback_command),
        ("compact", session_cmds.compact_command),
        ("queue", session_cmds.queue_command),
        ("tree", session_cmds.tree_command),
    )
)


@app.command()
def dev(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Log everything: migrations, broker, every task."
    ),
) -> None:
    """Run everything in one process: API, a worker and the timer (SQLite, no Redis)."""
    from nexus.cli.dev import run_dev

    settings = settings_or_exit()
    if not settings.embedded:
        errors.print(
            "[red]NEXUS_REDIS_URL is set[/red]: `nexus dev` is the embedded mode. For the "
            "distributed one run `nexus api`, `nexus worker` and `nexus beat`."
        )
        raise typer.Exit(2)
    run_dev(settings, host=host, port=port, console=console, verbose=verbose)


# Messages and sessions (nexus/cli/session_cmds.py), after `dev` in the command list.
_mount(
    (
        ("send", session_cmds.send),
        ("sessions", session_cmds.sessions),
        ("session", session_cmds.session),
    )
)


@hooks_app.callback(invoke_without_command=True)
def hooks_list(
    context: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List hooks with their breaker state."""
    if context.invoked_subcommand is None:
        from nexus.cli.hooks import list_hooks

        list_hooks(settings_or_exit(), as_json=as_json)


@hooks_app.command("sync")
def hooks_sync(
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="Accept a directory with no hooks: disable them all."
    ),
) -> None:
    """Ask the API to register the hooks in its NEXUS_HOOKS_DIR as the deployment's (run it
    at deploy): new ones are enabled, changed ones updated, ones whose file is gone disabled.
    Workers only run registered hooks and never change the registry themselves."""
    from nexus.cli.hooks import sync_hooks

    sync_hooks(settings_or_exit(), allow_empty=allow_empty)


@hooks_app.command("test")
def hooks_test(
    name: str = typer.Argument(..., help="The hook's name."),
    event_file: Path = typer.Argument(..., help="A JSON event (fields of an events row)."),
) -> None:
    """Dry-run one hook, in the API process, on an event read from EVENT_FILE: what it
    decides, with nothing written."""
    from nexus.cli.hooks import test_hook

    test_hook(settings_or_exit(), name, event_file)


def main() -> None:
    app()
