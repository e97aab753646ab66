"""`nexus send`, `sessions`, `session`, `tail`, `turn`, `fork`, `rollback`, `compact`,
`queue` and `tree`: sessions, their turns and their queues, asked of the running Nexus."""

from __future__ import annotations

import typer

from nexus.cli.configuration import settings_or_exit
from nexus.cli.model_options import TEMPERATURE_HELP, THINKING_HELP, model_config


def tail_command(
    session: str = typer.Argument(..., help="Session label (aliases are followed)."),
    after: str | None = typer.Option(
        None, "--after", metavar="EVENT_ID", help="Start after this stream event (replay)."
    ),
    count: int | None = typer.Option(None, "--count", min=1, help="Stop after N events."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per event."),
) -> None:
    """Follow SESSION live: the answer's text as it is written, one line per other event;
    a dropped connection is resumed where it stopped (Last-Event-ID)."""
    from nexus.cli.live import tail

    tail(settings_or_exit(), session, last_event_id=after, count=count, as_json=as_json)


def turn_command(
    turn_id: str = typer.Argument(..., help="The turn's id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show one turn with its messages and tool calls."""
    from nexus.cli.conversation import turn

    turn(settings_or_exit(), turn_id, as_json=as_json)


def fork_command(
    turn_id: str = typer.Argument(..., help="The turn to branch from."),
    label: str | None = typer.Option(None, "--label", help="The new session's label."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Create a new session whose head is TURN_ID (the persona is inherited)."""
    from nexus.cli.conversation import fork

    fork(settings_or_exit(), turn_id, label=label, as_json=as_json)


def rollback_command(
    session: str = typer.Argument(..., help="Session label (aliases are followed)."),
    turn_id: str = typer.Argument(..., help="A turn of the session's chain to go back to."),
    abort: bool = typer.Option(
        False, "--abort", help="Stop a running turn first, then roll back once it stopped."
    ),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds --abort waits for it."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Move SESSION's head back to TURN_ID: the next message continues from there; the
    turns after it stay in the ledger (`nexus tree` shows them as abandoned)."""
    from nexus.cli.conversation import rollback

    rollback(settings_or_exit(), session, turn_id, abort=abort, timeout_s=timeout, as_json=as_json)


def compact_command(
    session: str = typer.Argument(..., help="Session label (aliases are followed)."),
    instructions: str | None = typer.Argument(None, help="What the summary should focus on."),
    timeout: float = typer.Option(120.0, help="Seconds to wait for the session to get to it."),
) -> None:
    """Compact SESSION: queued through the API, carried out by the session's runner in
    order; history stays, the context starts from the summary."""
    from nexus.cli.remote import compact

    compact(settings_or_exit(), session, instructions, timeout_s=timeout)


def queue_command(
    session: str = typer.Argument(..., help="Session label (aliases are followed)."),
    cancel: str | None = typer.Option(None, "--cancel", help="Cancel this waiting item."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show a session's queued items and what became of each."""
    from nexus.cli.conversation import queue

    queue(settings_or_exit(), session, cancel=cancel, as_json=as_json)


def tree_command(
    session: str = typer.Argument(..., help="Session label (aliases are followed)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show a session's turn tree, with compactions, workers and forks marked."""
    from nexus.cli.conversation import tree

    tree(settings_or_exit(), session, as_json=as_json)


def send(
    session: str = typer.Argument(..., help="Session label (created when new)."),
    text: str = typer.Argument(..., help="The message."),
    persona: str | None = typer.Option(None, "--persona", help="Persona of a new session."),
    mode: str | None = typer.Option(None, "--mode", help="Queue mode for this message."),
    model: str | None = typer.Option(None, "--model", help="Model for this turn."),
    thinking: str | None = typer.Option(None, "--thinking", help=THINKING_HELP + " (this turn)."),
    max_tokens: str | None = typer.Option(None, "--max-tokens", help="Max tokens (this turn)."),
    temperature: str | None = typer.Option(
        None, "--temperature", help=TEMPERATURE_HELP + " (this turn)."
    ),
    wait: bool = typer.Option(False, "--wait", help="Print the answer when it commits."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds --wait waits."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Queue TEXT to SESSION through the running Nexus (NEXUS_API_URL); --model,
    --thinking, --max-tokens and --temperature apply to the turn that answers it."""
    from nexus.cli.remote import send as send_message

    config = model_config(
        model=model, thinking=thinking, max_tokens=max_tokens, temperature=temperature
    )
    send_message(
        settings_or_exit(), session, text, persona=persona, mode=mode, wait=wait,
        timeout_s=timeout, as_json=as_json, model_config=config,
    )  # fmt: skip


def sessions(
    persona: str | None = typer.Option(None, "--persona", help="Only this persona's."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List sessions."""
    from nexus.cli.remote import sessions as list_sessions

    list_sessions(settings_or_exit(), persona=persona, as_json=as_json)


def session(
    label: str = typer.Argument(..., help="Session label (aliases are followed)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show one session."""
    from nexus.cli.remote import session as show_session

    show_session(settings_or_exit(), label, as_json=as_json)
